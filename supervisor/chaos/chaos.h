// `geops chaos`: a supervisor that kills and restarts, to show that a
// deployment heals itself. It is not `geops launch`: no fault plan, nothing
// stretched, every process started the way an operator (or a Kubernetes
// pod) starts it, on the topology's fixed ports:
//   geops site   --topology T --site S --shard i --data-dir D --out O
//   geops worker --topology T --site S --worker w --out O
// (workers find the shards at host:base_port+i, shards their mirrors at
// base_port+1000+i).
//
// Once every shard listens and the workers run, it SIGKILLs (by PID, only
// processes it started) a random victim at random moments: a worker, one
// shard, or a whole site (every process of it still running), and starts
// exactly the killed command lines again after a random delay. Training
// kills fire when the furthest worker passes random clocks; the last
// `drain_kills` fire once the first worker has finished all its clocks (the
// end-of-run drain). One kill at a time: the next waits for the previous
// restart.
//
// The run passes when
//   - every worker finishes (exits 0), each restarted only by the harness;
//   - no process exits by itself (non-zero, a signal it did not send, or a
//     shard stopping on its own);
//   - no worker goes `stall_bound_s` without a clock advance (a read held
//     past a bound);
//   - `geops worker --check --wait` finds every site's replica exact
//     (counter workload: every value = workers x clocks);
//   - every shard stops cleanly (exit 0) on SIGTERM at the end.
// Results: OUT/logs/<process>.log (restarts append), OUT/events.jsonl (the
// children's events and the harness's kills and restarts, each with
// "chaos_t"), OUT/chaos.json (the kills, the stalls and restart-to-training
// times they caused (supervisor/chaos/chaos_report.h), distributions by kind, and the
// verdict).
//
// Not thread-safe: RunChaos owns a libuv loop and blocks until the run ends.
#ifndef GEOPS_SUPERVISOR_CHAOS_CHAOS_H_
#define GEOPS_SUPERVISOR_CHAOS_CHAOS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "config/topology.h"

namespace geops::supervisor {

struct ChaosOptions {
  config::Topology topology;            // see ValidateChaosTopology
  std::string topology_path;    // absolute; passed to the children
  std::string out_dir;          // exists
  std::string geops_binary;
  uint64_t seed = 1;
  int kills = 5;                // in all, drain kills included
  int drain_kills = 1;
  std::vector<std::string> kinds = {"worker", "shard", "site"};
  int64_t restart_min_ms = 1000;  // restart delay, uniform in [min, max]
  int64_t restart_max_ms = 10000;
  double stall_bound_s = 120;   // a worker without a clock advance this long fails the run
  double timeout_s = 1800;      // the whole run
  double progress_every_s = 0.1;  // workers' progress period (the stall's resolution)
  double check_wait_s = 120;    // --check --wait per site at the end
};

// InvalidArgument naming what a chaos run needs and the topology lacks:
// base_port on every site (restarted processes must come back on the same
// addresses), [storage] with durability "sync" (a killed shard must keep
// what it acknowledged), the counter workload (exact end state), no
// [[faults]] (the harness is the fault plan), no [training] command.
Status ValidateChaosTopology(const config::Topology& t);

// Returns the exit code: 0 passed, 1 failed (the reasons on stderr and in
// chaos.json), 2 configuration, 130/143 interrupted.
int RunChaos(const ChaosOptions& options);

}  // namespace geops::supervisor

#endif  // GEOPS_SUPERVISOR_CHAOS_CHAOS_H_
