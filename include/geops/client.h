// geops::client::Client: one worker of a geops site, training the
// application's own model.
//
// The model is a list of tables, each a dense row-major float32 matrix with
// a name and its initial values. The first worker to connect fixes the
// site's model (the site's topology says `[model] workload = "client"`):
// its tables and initial values become every shard's starting point. Later
// workers must bring the same tables and the same initial values (build
// them from the same seed), or Connect refuses them naming the table.
//
// A training loop, one iteration per clock:
//
//   geops::client::Client ps = geops::client::Client::Connect(options, tables);
//   for (int64_t c = ps.clock(); c < clocks; ++c) {
//     ps.Pull();                                  // values fresh enough for clock c
//     std::span<const float> w = ps.values("w");  // read them
//     std::vector<float> delta = Step(w);         // compute locally
//     ps.Push("w", delta);                        // add to the model
//     if (c + 1 < clocks) ps.Clock(); else ps.Finish();
//   }
//   ps.PullExact();                               // every worker's every update
//
// Consistency (stale synchronous parallel, staleness s in Options): after
// Pull() at clock c the values hold every update of every worker of the site
// through clock c - s - 1, and all of this worker's own earlier updates.
// Pushes are deltas: the shards add them up, whatever their order, so
// several workers may push to the same values in the same clock.
//
// A worker that restarts resumes: Connect returns a client at the clock the
// shards hold for this worker index.
//
// Errors: every call throws geops::client::Error (geops/error.h). A shard
// that cannot be reached is retried with back-off for a while before a call
// gives up with kUnavailable. After a failed Clock() or Finish() nothing has
// changed and the call may be repeated (updates are applied once).
//
// Thread-safety: one thread drives a Client; different Clients (e.g.
// several workers in one process) are independent.
#ifndef GEOPS_CLIENT_CLIENT_H_
#define GEOPS_CLIENT_CLIENT_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "geops/error.h"
#include "geops/options.h"

namespace geops::client {

// One table of the model.
struct Table {
  std::string name;   // unique within the model, printable, e.g. "fc1.weight"
  int64_t rows = 0;   // > 0
  int64_t cols = 0;   // > 0
  std::vector<float> initial_values;  // rows * cols values, row-major
};

// What the client has done so far (counters since Connect).
struct Stats {
  int64_t bytes_sent = 0;       // over the network, framing included
  int64_t bytes_received = 0;
  int64_t pulls_from_shards = 0;  // pulls that had to ask the shards
  int64_t pulls_from_cache = 0;   // pulls the local copy was fresh enough for
  int64_t retries = 0;            // calls repeated after a failure
  int64_t max_staleness = 0;      // largest (clock - clock of the values) computed on
  double pull_wait_seconds = 0;   // time spent in pulls
  double clock_seconds = 0;       // time spent in Clock()/Finish()
};

class Client {
 public:
  // Connects to every shard of the site and registers this worker with the
  // model `tables` (in this order; their indexes are the table ids below).
  // Blocks until every shard answered. Throws Error: kInvalidArgument for
  // bad options or tables, kFailedPrecondition when the site trains another
  // model (naming the table that differs), kUnavailable when a shard could
  // not be reached.
  static Client Connect(const Options& options, std::vector<Table> tables);

  // Disconnects. Without Finish() first, the shards keep this worker's
  // clock and wait for it (until its lease runs out); a worker that comes
  // back with the same index resumes there. A moved-from Client may only be
  // destroyed or assigned to.
  ~Client();
  Client(Client&&) noexcept;
  Client& operator=(Client&&) noexcept;
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // The model, as registered. A table index outside [0, num_tables())
  // throws Error (kOutOfRange), here and below.
  int num_tables() const;
  const std::string& table_name(int table) const;
  int64_t rows(int table) const;
  int64_t cols(int table) const;
  // The index of the table named `name`; throws Error (kNotFound).
  int table_index(std::string_view name) const;

  // The clock this worker is at: the number of Clock() calls it made (over
  // restarts). Pushes go into this clock.
  int64_t clock() const;
  // True after Finish().
  bool finished() const;

  // Makes values() fresh enough for clock() under the staleness bound:
  // served from the local copy when it is recent enough, else read from the
  // shards, waiting for slower workers if needed (rpc_timeout_ms per try).
  void Pull();
  // Reads from the shards now with staleness 0: the values hold every update
  // of every worker of the site (and, with several sites, of every site)
  // through clock() - 1, waiting until they are all in. The shards are asked
  // again (each wait bounded by rpc_timeout_ms) until `timeout_ms` has
  // passed, then it throws Error (kDeadlineExceeded). After Finish() this is
  // the final model.
  void PullExact(int64_t timeout_ms = 60000);

  // The values of a table as of the last pull (plus this worker's own
  // updates of the clocks ended since), rows * cols floats, row-major.
  // Valid until the next Pull(), PullExact(), Clock() or Finish().
  std::span<const float> values(int table) const;
  std::span<const float> values(std::string_view name) const;

  // Adds `delta` to the table's values, starting at element `offset` (the
  // whole table with the two-argument form: delta has rows * cols values).
  // Pushes of one clock add up locally and are sent by Clock(). Throws Error
  // (kInvalidArgument, nothing added) when the range leaves the table or a
  // value is NaN or infinite.
  void Push(int table, std::span<const float> delta);
  void Push(int table, int64_t offset, std::span<const float> delta);
  void Push(std::string_view name, std::span<const float> delta);

  // Ends this clock: sends its pushes to the shards and advances clock().
  void Clock();
  // Ends this clock as the worker's last: the shards stop waiting for this
  // worker. Only Pull(), PullExact(), values() and stats() are allowed after.
  void Finish();

  Stats stats() const;

 private:
  class Impl;
  explicit Client(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace geops::client

#endif  // GEOPS_CLIENT_CLIENT_H_
