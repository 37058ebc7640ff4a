// The counter workload of the crash tests, and the checks that prove a
// recovered shard lost no acknowledged batch and applied none twice.
//
// Over a model initialised to zeros, worker w of W pushes at every clock one
// batch to every chunk of the shard, with 1 at the elements whose index in
// the chunk is w modulo W and 0 elsewhere, then advances its clock. So after
// worker w's batches for clocks 0..n-1 are applied once each, its elements
// hold n everywhere: a lost batch or a twice-applied one shows as a count
// that disagrees with the clocks.
//
// Thread-safety: AckLog may be used from many threads; the rest are
// functions of their arguments (the shard is thread-safe itself).
#ifndef GEOPS_TESTS_STORAGE_COUNTER_WORKLOAD_H_
#define GEOPS_TESTS_STORAGE_COUNTER_WORKLOAD_H_

#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "common/model_spec.h"
#include "datacenter/shard.h"

namespace geops::storage::testing {

struct Ack {
  WorkerId worker = 0;
  Clock clock = 0;       // the batch's clock, or the clock advanced to
  bool advance = false;  // false: an Update was acknowledged
};

class AckLog {
 public:
  AckLog() = default;
  // Also writes each acknowledgement to `fd` as one line, "U w c" (update)
  // or "A w c" (advance), in a single write(2): a process killed at any
  // moment leaves only whole lines for the acknowledgements it made.
  explicit AckLog(int fd) : fd_(fd) {}

  void Add(Ack a) {
    std::lock_guard<std::mutex> lock(mu_);
    acks_.push_back(a);
    if (fd_ < 0) return;
    const std::string line = std::string(a.advance ? "A " : "U ") + std::to_string(a.worker) + " " +
                             std::to_string(a.clock) + "\n";
    if (::write(fd_, line.data(), line.size()) != static_cast<ssize_t>(line.size())) fd_ = -1;
  }
  std::vector<Ack> acks() const {
    std::lock_guard<std::mutex> lock(mu_);
    return acks_;
  }

  // The acknowledgements in text written by such a log; an unfinished last
  // line is ignored.
  static std::vector<Ack> Parse(const std::string& text) {
    std::vector<Ack> out;
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
      if (in.eof()) break;  // no newline: cut off
      std::istringstream fields(line);
      std::string kind;
      Ack a;
      if (fields >> kind >> a.worker >> a.clock && (kind == "U" || kind == "A")) {
        a.advance = kind == "A";
        out.push_back(a);
      }
    }
    return out;
  }

 private:
  mutable std::mutex mu_;
  std::vector<Ack> acks_;  // GUARDED_BY(mu_)
  int fd_ = -1;            // GUARDED_BY(mu_)
};

// The batch of worker `w` of `num_workers` for `keys` (back to back).
inline std::vector<float> CounterBatch(const ModelSpec& spec, const std::vector<ChunkKey>& keys, WorkerId w,
                                       int num_workers) {
  std::vector<float> out;
  for (const ChunkKey k : keys) {
    const int64_t n = spec.ChunkElements(k);
    for (int64_t e = 0; e < n; ++e) out.push_back(e % num_workers == w ? 1.0f : 0.0f);
  }
  return out;
}

// Registers worker `w` and runs clocks until `stop`, an error, or
// `max_clocks`: Update then AdvanceClock, logging each acknowledgement.
// Returns the first error (OK when stopped or done).
inline Status DriveCounterWorker(datacenter::Shard* shard, WorkerId w, int num_workers,
                                 const std::atomic<bool>* stop, AckLog* log, Clock max_clocks = 1 << 30) {
  const std::vector<ChunkKey> keys =
      shard->spec().ChunksOfShard(shard->options().shard_id, shard->options().num_shards);
  const std::vector<float> batch = CounterBatch(shard->spec(), keys, w, num_workers);
  Result<RegisterReply> reg = shard->RegisterWorker(w, 0, shard->options().auth_token);
  if (!reg.ok()) return reg.status();
  for (Clock c = reg->worker_clock; c < max_clocks && !stop->load(); ++c) {
    Result<UpdateReply> u = shard->Update(w, c, keys, batch);
    if (!u.ok()) return u.status();
    log->Add({w, c, false});
    Result<Clock> a = shard->AdvanceClock(w, c + 1, false);
    if (!a.ok()) return a.status();
    log->Add({w, c + 1, true});
  }
  return Status::Ok();
}

// Checks a shard recovered after a crash against the acknowledgements made
// before it. Registers every worker and replays its in-flight batch the way
// a client would (Update at the held clock): it must be a duplicate exactly
// when its count is already in, and afterwards every count must equal its
// worker's clock + 1. Returns "" or the first problem found.
inline std::string VerifyRecovered(datacenter::Shard* shard, const std::vector<Ack>& acks, int num_workers) {
  const ShardStatus st = shard->GetStatus();
  std::vector<Clock> held(num_workers), count(num_workers, -1);
  for (WorkerId w = 0; w < num_workers; ++w) held[w] = st.workers[w].clock;
  std::vector<std::pair<ChunkKey, std::vector<float>>> snap;
  shard->Snapshot(&snap);
  for (const auto& [key, values] : snap) {
    for (size_t e = 0; e < values.size(); ++e) {
      const WorkerId w = static_cast<WorkerId>(e % num_workers);
      const Clock v = static_cast<Clock>(values[e]);
      if (static_cast<float>(v) != values[e]) return "a count is not a whole number";
      if (count[w] == -1) count[w] = v;
      if (count[w] != v) {
        return "worker " + std::to_string(w) + "'s counts differ between chunks: " + std::to_string(count[w]) +
               " vs " + std::to_string(v) + " (a commit was split)";
      }
    }
  }
  for (WorkerId w = 0; w < num_workers; ++w) {
    if (count[w] != held[w] && count[w] != held[w] + 1) {
      return "worker " + std::to_string(w) + " is at clock " + std::to_string(held[w]) + " with " +
             std::to_string(count[w]) + " batches applied";
    }
  }
  for (const Ack& a : acks) {
    if (a.advance && held[a.worker] < a.clock) {
      return "acknowledged advance of worker " + std::to_string(a.worker) + " to " + std::to_string(a.clock) +
             " was lost (held " + std::to_string(held[a.worker]) + ")";
    }
    if (!a.advance && count[a.worker] < a.clock + 1) {
      return "acknowledged batch (" + std::to_string(a.worker) + ", " + std::to_string(a.clock) +
             ") was lost (" + std::to_string(count[a.worker]) + " applied)";
    }
  }
  const std::vector<ChunkKey> keys =
      shard->spec().ChunksOfShard(shard->options().shard_id, shard->options().num_shards);
  for (WorkerId w = 0; w < num_workers; ++w) {
    Result<RegisterReply> reg = shard->RegisterWorker(w, 0, shard->options().auth_token);
    if (!reg.ok()) return reg.status().ToString();
    if (reg->worker_clock != held[w]) return "registration resumes at another clock";
    if (held[w] > 0) {
      Result<UpdateReply> old = shard->Update(w, held[w] - 1, keys, CounterBatch(shard->spec(), keys, w, num_workers));
      if (!old.ok() || old->applied) return "an old batch was not a duplicate";
    }
    Result<UpdateReply> retry = shard->Update(w, held[w], keys, CounterBatch(shard->spec(), keys, w, num_workers));
    if (!retry.ok()) return retry.status().ToString();
    if (retry->applied != (count[w] == held[w])) {
      return "the replayed in-flight batch of worker " + std::to_string(w) + " was " +
             (retry->applied ? "applied again" : "refused though missing");
    }
  }
  shard->Snapshot(&snap);
  for (const auto& [key, values] : snap) {
    for (size_t e = 0; e < values.size(); ++e) {
      if (values[e] != static_cast<float>(held[e % num_workers] + 1)) return "a count is off after the replay";
    }
  }
  return "";
}

}  // namespace geops::storage::testing

#endif  // GEOPS_TESTS_STORAGE_COUNTER_WORKLOAD_H_
