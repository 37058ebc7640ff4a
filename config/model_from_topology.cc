#include "config/model_from_topology.h"

#include <algorithm>

#include "worker/mlp_model.h"

namespace geops::config {

Result<ModelSpec> BuildModelSpec(const Topology& t) {
  worker::MlpShape shape;
  shape.sizes = t.layers;
  GEOPS_RETURN_IF_ERROR(worker::ValidateMlpShape(shape));
  std::vector<TableSpec> tables = worker::MlpTables(shape);
  if (t.workload == "counter") {
    for (TableSpec& table : tables) {
      table.init = InitKind::kZeros;
      table.init_scale = 0.0f;
    }
  }
  return ModelSpec::Create(std::move(tables), t.chunk_kib * 1024, t.seed);
}

ShardOptions BuildShardOptions(const Topology& t, int site, int shard) {
  ShardOptions o;
  o.shard_id = shard;
  o.num_shards = t.sites[site].shards;
  o.num_workers = t.sites[site].workers;
  o.worker_lease_ms = t.worker_lease_ms;
  o.change_readers = t.change_readers;
  o.auth_token = t.auth_token;
  return o;
}

StorageOptions BuildStorageOptions(const Topology& t, const std::string& data_dir) {
  StorageOptions o;
  o.data_dir = data_dir;
  Result<Durability> durability = ParseDurability(t.durability);
  if (durability.ok()) o.durability = *durability;
  return o;
}

worker::TrainerOptions BuildTrainerOptions(const Topology& t, int site, int worker) {
  worker::TrainerOptions o;
  o.workload = t.workload;
  o.shape.sizes = t.layers;
  o.clocks = t.clocks;
  o.batch_size = t.batch_size;
  o.learning_rate = static_cast<float>(t.learning_rate);
  o.final_learning_rate = static_cast<float>(t.final_learning_rate);
  // Worker 0 of every site checks its own replica at the end; only site 0's
  // also evaluates along the way (the test set costs CPU on every site).
  o.evaluator = worker == 0;
  o.eval_every = site == 0 ? t.eval_every : 0;
  o.background_eval = t.background_eval;
  int before = 0;
  for (int s = 0; s < site; ++s) before += t.sites[s].workers;
  o.data_worker = before + worker;
  o.data_workers = t.total_workers();
  o.counter_workers = t.total_workers();  // every site's replica sums every worker's updates
  o.seed = t.seed;
  o.data_dir = t.data_dir;
  o.backend = t.backend;
  o.compute_threads = t.compute_threads;
  return o;
}

}  // namespace geops::config
