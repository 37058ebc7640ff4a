#include "worker/mlp_model.h"

#include <algorithm>
#include <cmath>

namespace geops::worker {

int MlpShape::max_width() const {
  int w = 0;
  for (int s : sizes) w = std::max(w, s);
  return w;
}

int64_t MlpShape::num_parameters() const {
  int64_t total = 0;
  for (int i = 0; i + 1 < static_cast<int>(sizes.size()); ++i) {
    total += int64_t{sizes[i]} * sizes[i + 1] + sizes[i + 1];
  }
  return total;
}

std::string MlpShape::ToString() const {
  std::string out;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (i > 0) out += '-';
    out += std::to_string(sizes[i]);
  }
  return out;
}

Status ValidateMlpShape(const MlpShape& shape) {
  const size_t n = shape.sizes.size();
  if (n < 2) {
    return InvalidArgumentError("MLP shape '" + shape.ToString() +
                                "' needs at least an input size and a class count");
  }
  if (n > static_cast<size_t>(kMaxLayerSizes)) {
    return InvalidArgumentError("MLP shape has " + std::to_string(n) + " sizes; at most " +
                                std::to_string(kMaxLayerSizes) + " are allowed");
  }
  for (size_t i = 0; i < n; ++i) {
    const int s = shape.sizes[i];
    if (s < 1 || s > kMaxLayerWidth) {
      return InvalidArgumentError("MLP shape '" + shape.ToString() + "': size " +
                                  std::to_string(i) + " is " + std::to_string(s) +
                                  "; must be in [1, " + std::to_string(kMaxLayerWidth) + "]");
    }
  }
  if (shape.classes() < 2) {
    return InvalidArgumentError("MLP shape '" + shape.ToString() +
                                "' has fewer than 2 classes in its last layer");
  }
  return Status::Ok();
}

Result<MlpShape> ParseMlpShape(std::string_view text) {
  const std::string quoted = "MLP shape '" + std::string(text) + "'";
  if (text.empty()) return InvalidArgumentError("MLP shape is empty; expected e.g. '784-512-256-10'");
  MlpShape shape;
  shape.sizes.clear();
  size_t start = 0;
  while (true) {
    const size_t dash = text.find('-', start);
    const std::string_view part =
        text.substr(start, dash == std::string_view::npos ? std::string_view::npos : dash - start);
    const std::string which = "size " + std::to_string(shape.sizes.size());
    if (part.empty()) return InvalidArgumentError(quoted + ": " + which + " is empty");
    int64_t value = 0;
    for (char c : part) {
      if (c < '0' || c > '9') {
        return InvalidArgumentError(quoted + ": " + which + " ('" + std::string(part) +
                                    "') is not a positive decimal number");
      }
      value = value * 10 + (c - '0');
      if (value > kMaxLayerWidth) {
        return InvalidArgumentError(quoted + ": " + which + " exceeds " +
                                    std::to_string(kMaxLayerWidth));
      }
    }
    shape.sizes.push_back(static_cast<int>(value));
    if (shape.sizes.size() > static_cast<size_t>(kMaxLayerSizes)) {
      return InvalidArgumentError(quoted + " has more than " + std::to_string(kMaxLayerSizes) +
                                  " sizes");
    }
    if (dash == std::string_view::npos) break;
    start = dash + 1;
  }
  Status valid = ValidateMlpShape(shape);
  if (!valid.ok()) return valid;
  return shape;
}

std::string WeightTableName(int layer) { return "fc" + std::to_string(layer + 1) + ".weight"; }
std::string BiasTableName(int layer) { return "fc" + std::to_string(layer + 1) + ".bias"; }

std::vector<TableSpec> MlpTables(const MlpShape& shape) {
  std::vector<TableSpec> tables;
  tables.reserve(shape.num_tables());
  for (int i = 0; i < shape.num_layers(); ++i) {
    const int in = shape.sizes[i];
    const int out = shape.sizes[i + 1];
    tables.push_back(TableSpec{WeightTableName(i), in, out, InitKind::kUniform,
                               static_cast<float>(std::sqrt(6.0 / in))});
    tables.push_back(TableSpec{BiasTableName(i), 1, out, InitKind::kZeros, 0.0f});
  }
  return tables;
}

Result<ModelSpec> MlpModelSpec(const MlpShape& shape, int64_t chunk_bytes, uint64_t seed) {
  GEOPS_RETURN_IF_ERROR(ValidateMlpShape(shape));
  return ModelSpec::Create(MlpTables(shape), chunk_bytes, seed);
}

Result<MlpShape> MlpShapeFromSpec(const ModelSpec& spec) {
  const int n = spec.num_tables();
  if (n == 0 || n % 2 != 0) {
    return InvalidArgumentError("model has " + std::to_string(n) +
                                " tables; an MLP has a weight and a bias table per layer");
  }
  MlpShape shape;
  shape.sizes.clear();
  for (int layer = 0; layer < n / 2; ++layer) {
    const TableSpec& w = spec.table(2 * layer);
    const TableSpec& b = spec.table(2 * layer + 1);
    if (w.name != WeightTableName(layer)) {
      return InvalidArgumentError("table " + std::to_string(2 * layer) + " is '" + w.name +
                                  "'; expected '" + WeightTableName(layer) + "'");
    }
    if (b.name != BiasTableName(layer)) {
      return InvalidArgumentError("table " + std::to_string(2 * layer + 1) + " is '" + b.name +
                                  "'; expected '" + BiasTableName(layer) + "'");
    }
    if (layer == 0) {
      if (w.rows > kMaxLayerWidth) return InvalidArgumentError("table '" + w.name + "' is too tall");
      shape.sizes.push_back(static_cast<int>(w.rows));
    } else if (w.rows != shape.sizes.back()) {
      return InvalidArgumentError("table '" + w.name + "' has " + std::to_string(w.rows) +
                                  " rows; the previous layer has " +
                                  std::to_string(shape.sizes.back()) + " outputs");
    }
    if (b.rows != 1 || b.cols != w.cols) {
      return InvalidArgumentError("table '" + b.name + "' is " + std::to_string(b.rows) + "x" +
                                  std::to_string(b.cols) + "; expected 1x" +
                                  std::to_string(w.cols));
    }
    if (w.cols > kMaxLayerWidth) return InvalidArgumentError("table '" + w.name + "' is too wide");
    shape.sizes.push_back(static_cast<int>(w.cols));
  }
  GEOPS_RETURN_IF_ERROR(ValidateMlpShape(shape));
  return shape;
}

std::vector<std::vector<float>> InitialTables(const ModelSpec& spec) {
  std::vector<std::vector<float>> tables(spec.num_tables());
  for (TableId t = 0; t < static_cast<TableId>(spec.num_tables()); ++t) {
    const TableSpec& ts = spec.table(t);
    tables[t].resize(static_cast<size_t>(ts.rows * ts.cols));
    for (const ChunkKey& key : spec.ChunksOfTable(t)) {
      spec.InitChunk(key, tables[t].data() + spec.ChunkOffset(key));
    }
  }
  return tables;
}

}  // namespace geops::worker
