// MlpShape and the parameter tables of a multi-layer perceptron.
//
// An MLP of shape d0-d1-...-dL has L fully connected layers. Layer i (1-based)
// owns two tables, in this order in the ModelSpec:
//   "fc{i}.weight"  rows = d(i-1), cols = d(i), row-major, so y = x * W;
//                   He-uniform init: uniform in [-sqrt(6/d(i-1)), +sqrt(6/d(i-1))]
//   "fc{i}.bias"    rows = 1, cols = d(i), zeros
// Hidden layers use ReLU; the last layer's outputs are softmax logits over
// d(L) classes. Every process that builds the spec from the same shape, chunk
// size and seed gets the same fingerprint and the same initial values.
//
// Thread-safety: plain values and pure functions.
#ifndef GEOPS_WORKER_MLP_MODEL_H_
#define GEOPS_WORKER_MLP_MODEL_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/model_spec.h"
#include "common/status.h"

namespace geops::worker {

// Largest width accepted for one layer; keeps scratch buffers bounded.
inline constexpr int kMaxLayerWidth = 1 << 20;
// Most layer sizes in a shape (inputs and outputs included).
inline constexpr int kMaxLayerSizes = 64;

struct MlpShape {
  // Layer sizes, inputs first and classes last. Default: Fashion-MNIST MLP.
  std::vector<int> sizes = {784, 512, 256, 10};

  int inputs() const { return sizes.front(); }
  int classes() const { return sizes.back(); }
  // Number of fully connected layers (sizes.size() - 1).
  int num_layers() const { return static_cast<int>(sizes.size()) - 1; }
  // Two tables per layer: weight then bias.
  int num_tables() const { return 2 * num_layers(); }
  // Widest layer, inputs included.
  int max_width() const;
  // Total number of floats over every table.
  int64_t num_parameters() const;
  // "784-512-256-10".
  std::string ToString() const;

  bool operator==(const MlpShape&) const = default;
};

// OK when there are 2..kMaxLayerSizes sizes, each in [1, kMaxLayerWidth], and
// at least 2 classes; otherwise InvalidArgument naming the bad entry.
Status ValidateMlpShape(const MlpShape& shape);

// Parses "784-512-256-10" (decimal sizes joined by '-', no spaces). Returns
// InvalidArgument quoting the text and naming the bad part.
Result<MlpShape> ParseMlpShape(std::string_view text);

// "fc{layer+1}.weight" / "fc{layer+1}.bias" for the 0-based `layer`.
std::string WeightTableName(int layer);
std::string BiasTableName(int layer);

// The tables of `shape`, in ModelSpec order. REQUIRES: ValidateMlpShape ok.
std::vector<TableSpec> MlpTables(const MlpShape& shape);

// The ModelSpec of `shape`. InvalidArgument for a bad shape or chunk size.
Result<ModelSpec> MlpModelSpec(const MlpShape& shape, int64_t chunk_bytes = kDefaultChunkBytes,
                               uint64_t seed = 1);

// Recovers the shape from a spec made by MlpModelSpec (e.g. one received from
// a site). InvalidArgument naming the first table that does not fit the
// layout above.
Result<MlpShape> MlpShapeFromSpec(const ModelSpec& spec);

// Every table of `spec` as one dense row-major buffer holding its initial
// values (InitChunk over all chunks), in table order. Allocates
// spec.total_elements() floats.
std::vector<std::vector<float>> InitialTables(const ModelSpec& spec);

}  // namespace geops::worker

#endif  // GEOPS_WORKER_MLP_MODEL_H_
