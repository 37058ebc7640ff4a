#include "metrics/shard_metrics.h"

#include <string>

namespace geops::metrics {

void AppendShardMetrics(const ShardStatus& st, int64_t connections_refused, MetricsBuilder* b) {
  b->Counter("geops_lan_requests_total", "Requests the shard served, per method",
             static_cast<double>(st.reads_served), {{"method", "read"}});
  b->Counter("geops_lan_requests_total", "Requests the shard served, per method",
             static_cast<double>(st.update_batches_applied + st.update_batches_duplicate), {{"method", "update"}});
  b->Counter("geops_lan_bytes_total", "Value bytes the shard served or took in, per method",
             static_cast<double>(st.read_bytes_served), {{"method", "read"}});
  b->Counter("geops_lan_bytes_total", "Value bytes the shard served or took in, per method",
             static_cast<double>(st.update_bytes_applied), {{"method", "update"}});
  b->Counter("geops_lan_duplicate_updates_total", "Update batches taken again (a retry) and not re-applied",
             static_cast<double>(st.update_batches_duplicate));
  for (size_t i = 1; i < st.rejected_by_code.size(); ++i) {
    if (st.rejected_by_code[i] == 0) continue;
    b->Counter("geops_lan_refusals_total", "Requests refused, by status code",
               static_cast<double>(st.rejected_by_code[i]),
               {{"code", std::string(StatusCodeName(static_cast<StatusCode>(i)))}});
  }
  b->Counter("geops_lan_connections_refused_total", "Connections refused at accept (limits)",
             static_cast<double>(connections_refused));
  b->Histogram("geops_ssp_read_wait_seconds",
               "Reads that went to the shard: how long each waited for the SSP clock and the WAN gate", st.read_wait);
  b->Gauge("geops_shard_clock", "The shard clock: every live worker has finished the clocks below it",
           static_cast<double>(st.shard_clock));
  b->Gauge("geops_shard_elements", "Model values this shard holds", static_cast<double>(st.num_elements));
  for (const WorkerState& w : st.workers) {
    const Labels worker = {{"worker", std::to_string(w.worker_id)}};
    b->Gauge("geops_shard_worker_clock", "Each registered worker's clock as the shard knows it",
             static_cast<double>(w.clock), worker);
    b->Gauge("geops_shard_worker_staleness_clocks", "Each worker's clock minus the shard clock",
             static_cast<double>(w.clock - st.shard_clock), worker);
  }
  if (st.persistent) {
    b->Histogram("geops_store_commit_seconds", "RocksDB commits of the shard's state: how long each took",
                 st.store_commit);
    b->Counter("geops_store_committed_bytes_total", "Bytes the shard's commits wrote",
               static_cast<double>(st.store_bytes_committed));
    b->Counter("geops_store_chunks_saved_total",
               "Chunks an update reached while their commit was being written (copied once, copy-on-write)",
               static_cast<double>(st.store_chunks_saved));
  }
  if (st.memory_budget_bytes > 0) {
    b->Gauge("geops_shard_memory_budget_bytes", "The shard process's memory budget",
             static_cast<double>(st.memory_budget_bytes));
    b->Gauge("geops_shard_memory_resident_bytes", "The shard process's resident memory at the last sample",
             static_cast<double>(st.memory_resident_bytes));
    b->Gauge("geops_shard_memory_over_budget", "1 while updates are refused for memory",
             st.memory_over_budget ? 1.0 : 0.0);
    b->Counter("geops_shard_memory_refusals_total", "Updates refused while over the memory budget",
               static_cast<double>(st.memory_updates_refused));
  }
}

void AppendWorkerMetrics(int64_t clock, int64_t clocks, const worker::PsClientStats& st, MetricsBuilder* b) {
  b->Gauge("geops_worker_clock", "The worker's clock (iterations finished)", static_cast<double>(clock));
  b->Gauge("geops_worker_clocks", "The clocks the worker is to run", static_cast<double>(clocks));
  b->Gauge("geops_worker_max_staleness_clocks", "Largest clock - cache stamp a read was served at",
           static_cast<double>(st.max_staleness));
  b->Counter("geops_worker_lan_bytes_total", "Bytes the worker sent to and received from its shards",
             static_cast<double>(st.bytes_sent), {{"direction", "sent"}});
  b->Counter("geops_worker_lan_bytes_total", "Bytes the worker sent to and received from its shards",
             static_cast<double>(st.bytes_received), {{"direction", "received"}});
  b->Counter("geops_worker_reads_total", "Reads, by where they were served",
             static_cast<double>(st.refreshes), {{"served", "shard"}});
  b->Counter("geops_worker_reads_total", "Reads, by where they were served",
             static_cast<double>(st.cache_hits), {{"served", "cache"}});
  b->Counter("geops_worker_read_wait_seconds_total", "Time spent refreshing the cache from the shards",
             st.read_wait_seconds);
  b->Counter("geops_worker_flush_seconds_total", "Time spent flushing clocks", st.flush_seconds);
  b->Counter("geops_worker_retries_total", "Calls retried after a failure", static_cast<double>(st.retries));
}

}  // namespace geops::metrics
