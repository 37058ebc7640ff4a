#include "tests/storage/rocksdb_surgery.h"

#include <rocksdb/db.h>
#include <rocksdb/options.h>

#include <functional>
#include <vector>

#include "storage/ledger_merge_operator.h"
#include "storage/store_format.h"

namespace geops::storage::testing {
namespace {

Status Check(const rocksdb::Status& s, const std::string& what) {
  if (s.ok()) return Status::Ok();
  return InternalError(what + ": " + s.ToString());
}

// Opens every family of `dir`, runs `edit`, closes.
Status Edit(const std::string& dir,
            const std::function<rocksdb::Status(rocksdb::DB*, const std::vector<std::string>&,
                                                const std::vector<rocksdb::ColumnFamilyHandle*>&)>& edit) {
  rocksdb::DBOptions options;
  std::vector<std::string> names;
  GEOPS_RETURN_IF_ERROR(Check(rocksdb::DB::ListColumnFamilies(options, dir, &names), "listing " + dir));
  std::vector<rocksdb::ColumnFamilyDescriptor> families;
  for (const std::string& n : names) {
    rocksdb::ColumnFamilyOptions family;
    if (n == format::kLedgerFamily) family.merge_operator = NewLedgerMergeOperator();
    families.emplace_back(n, family);
  }
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* db = nullptr;
  GEOPS_RETURN_IF_ERROR(Check(rocksdb::DB::Open(options, dir, families, &handles, &db), "opening " + dir));
  rocksdb::Status s = edit(db, names, handles);
  for (rocksdb::ColumnFamilyHandle* h : handles) db->DestroyColumnFamilyHandle(h).PermitUncheckedError();
  db->Close().PermitUncheckedError();
  delete db;
  return Check(s, "editing " + dir);
}

rocksdb::ColumnFamilyHandle* Find(const std::vector<std::string>& names,
                                  const std::vector<rocksdb::ColumnFamilyHandle*>& handles,
                                  const std::string& family) {
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == family) return handles[i];
  }
  return nullptr;
}

}  // namespace

Status PutRaw(const std::string& dir, const std::string& family, std::string_view key, std::string_view value) {
  return Edit(dir, [&](rocksdb::DB* db, const auto& names, const auto& handles) {
    rocksdb::ColumnFamilyHandle* h = Find(names, handles, family);
    if (h == nullptr) return rocksdb::Status::NotFound("no family " + family);
    return db->Put(rocksdb::WriteOptions(), h, rocksdb::Slice(key.data(), key.size()),
                   rocksdb::Slice(value.data(), value.size()));
  });
}

Status DeleteRaw(const std::string& dir, const std::string& family, std::string_view key) {
  return Edit(dir, [&](rocksdb::DB* db, const auto& names, const auto& handles) {
    rocksdb::ColumnFamilyHandle* h = Find(names, handles, family);
    if (h == nullptr) return rocksdb::Status::NotFound("no family " + family);
    return db->Delete(rocksdb::WriteOptions(), h, rocksdb::Slice(key.data(), key.size()));
  });
}

Status MergeRaw(const std::string& dir, const std::string& family, std::string_view key, std::string_view operand) {
  return Edit(dir, [&](rocksdb::DB* db, const auto& names, const auto& handles) {
    rocksdb::ColumnFamilyHandle* h = Find(names, handles, family);
    if (h == nullptr) return rocksdb::Status::NotFound("no family " + family);
    return db->Merge(rocksdb::WriteOptions(), h, rocksdb::Slice(key.data(), key.size()),
                     rocksdb::Slice(operand.data(), operand.size()));
  });
}

Status DropFamily(const std::string& dir, const std::string& family) {
  return Edit(dir, [&](rocksdb::DB* db, const auto& names, const auto& handles) {
    rocksdb::ColumnFamilyHandle* h = Find(names, handles, family);
    if (h == nullptr) return rocksdb::Status::NotFound("no family " + family);
    return db->DropColumnFamily(h);
  });
}

Status CreatePlainRocksDb(const std::string& dir) {
  rocksdb::Options options;
  options.create_if_missing = true;
  rocksdb::DB* db = nullptr;
  GEOPS_RETURN_IF_ERROR(Check(rocksdb::DB::Open(options, dir, &db), "creating " + dir));
  rocksdb::Status s = db->Put(rocksdb::WriteOptions(), "hello", "world");
  db->Close().PermitUncheckedError();
  delete db;
  return Check(s, "writing " + dir);
}

}  // namespace geops::storage::testing
