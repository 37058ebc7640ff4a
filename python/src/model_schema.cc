#include "python/src/model_schema.h"

#include <algorithm>

namespace geops::python {
namespace {

std::string Shape(int64_t rows, int64_t cols) { return std::to_string(rows) + "x" + std::to_string(cols); }

Status CheckSameTables(std::span<const TableShape> shapes, const ModelSpec& site) {
  const size_t common = std::min<size_t>(shapes.size(), site.num_tables());
  for (size_t i = 0; i < common; ++i) {
    const TableShape& mine = shapes[i];
    const TableSpec& theirs = site.table(static_cast<TableId>(i));
    if (mine.name != theirs.name) {
      return FailedPreconditionError("model mismatch at table " + std::to_string(i) + ": the Python model has '" +
                                     mine.name + "', the site's model has '" + theirs.name + "'");
    }
    if (mine.rows != theirs.rows || mine.cols != theirs.cols) {
      return FailedPreconditionError("model mismatch: table '" + mine.name + "' is " + Shape(mine.rows, mine.cols) +
                                     " in the Python model, " + Shape(theirs.rows, theirs.cols) +
                                     " in the site's model");
    }
  }
  if (shapes.size() > common) {
    return FailedPreconditionError("model mismatch: the Python model has table '" + shapes[common].name +
                                   "', which the site's model lacks");
  }
  if (static_cast<size_t>(site.num_tables()) > common) {
    return FailedPreconditionError("model mismatch: the site's model has table '" +
                                   site.table(static_cast<TableId>(common)).name +
                                   "', which the Python model lacks");
  }
  return Status::Ok();
}

}  // namespace

std::vector<TableSpec> TableSpecsOf(std::span<const TableShape> shapes) {
  std::vector<TableSpec> tables;
  tables.reserve(shapes.size());
  for (const TableShape& s : shapes) {
    TableSpec t;
    t.name = s.name;
    t.rows = s.rows;
    t.cols = s.cols;
    t.init = InitKind::kProvided;  // the checksum follows once the values are known (Client::Start)
    tables.push_back(std::move(t));
  }
  return tables;
}

Result<ModelSpec> ClientModelSpec(std::span<const TableShape> shapes, int64_t chunk_bytes,
                                  const ModelSpec* site_model) {
  if (shapes.empty()) return InvalidArgumentError("the model has no parameters");
  if (site_model != nullptr) {
    GEOPS_RETURN_IF_ERROR(CheckSameTables(shapes, *site_model));
    return *site_model;
  }
  return ModelSpec::Create(TableSpecsOf(shapes), chunk_bytes, 0);
}

}  // namespace geops::python
