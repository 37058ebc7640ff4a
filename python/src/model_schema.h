// The schema a Python model registers: one table per named parameter.
//
// This is the one place that turns the shapes the Python side reports into
// the TableSpecs and ModelSpec that PsClient and the shards agree on. The
// Python side (geops/schema.py) maps each tensor to (rows, cols); here they
// become tables whose values start as the site's model says:
//   - with a topology of a built-in workload ("mlp", "counter"), the site
//     builds its own model; the client checks that the Python model has the
//     same tables, in order, and then uses exactly the site's spec (so the
//     fingerprints match);
//   - otherwise (topology workload "client", or none given) the tables are
//     made from the Python model alone, their values provided by the model
//     itself (InitKind::kProvided; python/src/client.h adds the checksums).
//
// Pure functions; thread-compatible.
#ifndef GEOPS_PYTHON_SRC_MODEL_SCHEMA_H_
#define GEOPS_PYTHON_SRC_MODEL_SCHEMA_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/model_spec.h"
#include "common/status.h"

namespace geops::python {

// A parameter as the Python side sees it, already mapped to a matrix.
struct TableShape {
  std::string name;
  int64_t rows = 0;
  int64_t cols = 0;
};

// The TableSpecs of a Python model, in parameter order.
std::vector<TableSpec> TableSpecsOf(std::span<const TableShape> shapes);

// The ModelSpec the client registers (see file comment). `site_model`: the
// topology's own model for a built-in workload, or null. FailedPrecondition
// naming the first table that differs from `site_model` (missing, extra,
// renamed or reshaped); InvalidArgument for shapes ModelSpec refuses.
Result<ModelSpec> ClientModelSpec(std::span<const TableShape> shapes, int64_t chunk_bytes,
                                  const ModelSpec* site_model);

}  // namespace geops::python

#endif  // GEOPS_PYTHON_SRC_MODEL_SCHEMA_H_
