#include "storage/client_model_file.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

namespace geops::storage {
namespace {

static_assert(std::endian::native == std::endian::little, "the model file is little-endian");

constexpr char kMagic[8] = {'G', 'E', 'O', 'P', 'S', 'M', 'D', 'L'};

template <typename T>
void Put(std::string* out, T v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof(v));
}

uint32_t Crc(const char* p, size_t n) {
  uLong crc = crc32(0L, Z_NULL, 0);
  while (n > 0) {
    const uInt step = static_cast<uInt>(std::min<size_t>(n, 1u << 30));
    crc = crc32(crc, reinterpret_cast<const Bytef*>(p), step);
    p += step;
    n -= step;
  }
  return static_cast<uint32_t>(crc);
}

// Reads fixed-size fields from a byte range; any read past the end fails.
class Reader {
 public:
  Reader(const std::string& bytes, size_t end) : bytes_(bytes), end_(end) {}
  template <typename T>
  bool Get(T* v) {
    if (end_ - pos_ < sizeof(T)) return false;
    std::memcpy(v, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }
  bool GetBytes(size_t n, const char** p) {
    if (end_ - pos_ < n) return false;
    *p = bytes_.data() + pos_;
    pos_ += n;
    return true;
  }
  bool done() const { return pos_ == end_; }

 private:
  const std::string& bytes_;
  const size_t end_;
  size_t pos_ = 0;
};

Status IoError(const std::string& what, const std::string& path) {
  return UnavailableError(what + " " + path + ": " + std::strerror(errno));
}

Status SyncPath(const std::string& path, int flags) {
  const int fd = ::open(path.c_str(), flags);
  if (fd < 0) return IoError("cannot open", path);
  const int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) return IoError("cannot fsync", path);
  return Status::Ok();
}

}  // namespace

Status WriteClientModel(const std::string& dir, const ModelSpec& spec) {
  if (!spec.client_defined()) {
    return InvalidArgumentError("only a client-defined model is written to a model file");
  }
  std::string bytes(kMagic, sizeof(kMagic));
  Put<uint32_t>(&bytes, kModelFileVersion);
  Put<int64_t>(&bytes, spec.chunk_bytes());
  Put<uint32_t>(&bytes, static_cast<uint32_t>(spec.num_tables()));
  for (const TableSpec& t : spec.tables()) {
    Put<uint32_t>(&bytes, static_cast<uint32_t>(t.name.size()));
    bytes += t.name;
    Put<int64_t>(&bytes, t.rows);
    Put<int64_t>(&bytes, t.cols);
    Put<uint64_t>(&bytes, t.init_checksum);
  }
  const ChunkValuesMap empty;
  const ChunkValuesMap& values = spec.initial_values() ? *spec.initial_values() : empty;
  Put<uint64_t>(&bytes, values.size());
  for (const auto& [key, v] : values) {
    Put<uint32_t>(&bytes, key.table);
    Put<uint32_t>(&bytes, key.chunk);
    Put<uint32_t>(&bytes, static_cast<uint32_t>(v.size()));
    bytes.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
  }
  Put<uint32_t>(&bytes, Crc(bytes.data(), bytes.size()));

  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return UnavailableError("cannot create " + dir + ": " + ec.message());
  const std::string path = dir + "/" + kModelFileName;
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return IoError("cannot create", tmp);
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      Status s = IoError("cannot write", tmp);
      ::close(fd);
      return s;
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    Status s = IoError("cannot fsync", tmp);
    ::close(fd);
    return s;
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) return IoError("cannot rename to", path);
  return SyncPath(dir, O_RDONLY | O_DIRECTORY);
}

Result<std::optional<ModelSpec>> ReadClientModel(const std::string& dir) {
  const std::string path = dir + "/" + kModelFileName;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return std::optional<ModelSpec>();
  std::ifstream in(path, std::ios::binary);
  if (!in) return UnavailableError("cannot open " + path);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto damaged = [&](const std::string& what) { return DataLossError("model file " + path + ": " + what); };
  if (bytes.size() < sizeof(kMagic) + 8 || std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0) {
    return damaged("not a geops model file");
  }
  uint32_t stored_crc = 0;
  std::memcpy(&stored_crc, bytes.data() + bytes.size() - 4, 4);
  if (Crc(bytes.data(), bytes.size() - 4) != stored_crc) return damaged("checksum mismatch (damaged)");
  Reader r(bytes, bytes.size() - 4);
  const char* skip = nullptr;
  r.GetBytes(sizeof(kMagic), &skip);
  uint32_t version = 0;
  int64_t chunk_bytes = 0;
  uint32_t num_tables = 0;
  if (!r.Get(&version)) return damaged("truncated");
  if (version != kModelFileVersion) {
    return FailedPreconditionError("model file " + path + " has version " + std::to_string(version) +
                                   "; this build reads version " + std::to_string(kModelFileVersion));
  }
  if (!r.Get(&chunk_bytes) || !r.Get(&num_tables)) return damaged("truncated");
  if (num_tables > static_cast<uint32_t>(kMaxTables)) return damaged("too many tables");
  std::vector<TableSpec> tables(num_tables);
  for (TableSpec& t : tables) {
    uint32_t len = 0;
    const char* name = nullptr;
    if (!r.Get(&len) || len > 256 || !r.GetBytes(len, &name) || !r.Get(&t.rows) || !r.Get(&t.cols) ||
        !r.Get(&t.init_checksum)) {
      return damaged("truncated table list");
    }
    t.name.assign(name, len);
    t.init = InitKind::kProvided;
  }
  Result<ModelSpec> spec = ModelSpec::Create(std::move(tables), chunk_bytes, 0);
  if (!spec.ok()) return damaged(spec.status().message());
  uint64_t chunks = 0;
  if (!r.Get(&chunks)) return damaged("truncated");
  auto values = std::make_shared<ChunkValuesMap>();
  for (uint64_t i = 0; i < chunks; ++i) {
    uint32_t table = 0, chunk = 0, elements = 0;
    const char* data = nullptr;
    if (!r.Get(&table) || !r.Get(&chunk) || !r.Get(&elements) ||
        !r.GetBytes(size_t{elements} * sizeof(float), &data)) {
      return damaged("truncated chunk values");
    }
    std::vector<float> v(elements);
    if (elements > 0) std::memcpy(v.data(), data, size_t{elements} * sizeof(float));
    (*values)[ChunkKey{table, chunk}] = std::move(v);
  }
  if (!r.done()) return damaged("trailing bytes");
  Result<ModelSpec> with = spec->WithInitialValues(std::move(values));
  if (!with.ok()) return damaged(with.status().message());
  return std::optional<ModelSpec>(std::move(with).value());
}

}  // namespace geops::storage
