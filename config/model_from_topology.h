// The ModelSpec and option structs that a topology implies for one process.
// Pure functions of a Topology; thread-compatible.
#ifndef GEOPS_CONFIG_MODEL_FROM_TOPOLOGY_H_
#define GEOPS_CONFIG_MODEL_FROM_TOPOLOGY_H_

#include <string>

#include "common/model_spec.h"
#include "common/options.h"
#include "common/status.h"
#include "config/client_options.h"  // BuildClientOptions, with the other option builders
#include "config/topology.h"
#include "worker/trainer.h"

namespace geops::config {

// The model of the topology's workload: the MLP's tables (He-uniform
// weights) for "mlp", the same tables all zero for "counter".
Result<ModelSpec> BuildModelSpec(const Topology& topology);

ShardOptions BuildShardOptions(const Topology& topology, int site, int shard);

// The storage options of a shard whose store lives in `data_dir` ("" keeps
// it in memory). REQUIRES: the topology validated (its durability parses).
StorageOptions BuildStorageOptions(const Topology& topology, const std::string& data_dir);

// Worker `worker` of site `site`: its data share, whether it evaluates.
worker::TrainerOptions BuildTrainerOptions(const Topology& topology, int site, int worker);

}  // namespace geops::config

#endif  // GEOPS_CONFIG_MODEL_FROM_TOPOLOGY_H_
