#include "datacenter/shard_persister.h"

#include <algorithm>
#include <chrono>

#include "common/thread_name.h"

namespace geops::datacenter {

ShardPersister::ShardPersister(ShardStore* store, ChunkStore* chunks, ClockTracker* tracker, ShardId shard,
                               int num_workers)
    : store_(store),
      chunks_(chunks),
      captured_(chunks),
      tracker_(tracker),
      shard_(shard),
      num_workers_(num_workers),
      chunk_marked_(new std::atomic<uint8_t>[std::max<int64_t>(chunks->num_chunks(), 1)]),
      worker_marked_(new std::atomic<uint8_t>[num_workers]) {
  for (int64_t i = 0; i < chunks->num_chunks(); ++i) chunk_marked_[i].store(0, std::memory_order_relaxed);
  for (int w = 0; w < num_workers; ++w) worker_marked_[w].store(0, std::memory_order_relaxed);
}

ShardPersister::~ShardPersister() {
  {
    std::lock_guard<std::mutex> lock(state_mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  if (committer_.joinable()) committer_.join();
}

void ShardPersister::Start() { committer_ = std::thread([this] {
    NameThisThread("store-commit");
    CommitterLoop();
  }); }

void ShardPersister::Mutation::MarkChunk(int64_t local) {
  p_->chunk_marked_[local].store(1, std::memory_order_relaxed);
  marked_ = true;
}

void ShardPersister::Mutation::MarkWorker(WorkerId worker) {
  p_->worker_marked_[worker].store(1, std::memory_order_relaxed);
  marked_ = true;
}

void ShardPersister::Mutation::MarkOrigin(SiteId origin, uint64_t seq) {
  {
    std::lock_guard<std::mutex> lock(p_->origin_mu_);
    uint64_t& mark = p_->origin_marks_[origin];
    mark = std::max(mark, seq);
  }
  marked_ = true;
}

void ShardPersister::Mutation::ForgetOrigin(SiteId origin) {
  {
    std::lock_guard<std::mutex> lock(p_->origin_mu_);
    p_->origin_marks_[origin] = 0;
  }
  marked_ = true;
}

void ShardPersister::Mutation::AddLedger(LedgerAdd add) {
  {
    std::lock_guard<std::mutex> lock(p_->origin_mu_);
    p_->ledger_adds_.push_back(std::move(add));
  }
  marked_ = true;
}

void ShardPersister::Mutation::ClearLedger(SiteId origin) {
  {
    std::lock_guard<std::mutex> lock(p_->origin_mu_);
    // Adds not yet committed go with the clear (the store applies clears
    // first, so they would otherwise survive it).
    std::erase_if(p_->ledger_adds_, [origin](const LedgerAdd& a) { return a.origin == origin; });
    p_->ledger_clears_.push_back(origin);
  }
  marked_ = true;
}

void ShardPersister::Mutation::Quarantine(QuarantineRecord record) {
  {
    std::lock_guard<std::mutex> lock(p_->origin_mu_);
    p_->quarantined_.push_back(std::move(record));
  }
  marked_ = true;
}

uint64_t ShardPersister::Mutation::Finish() {
  if (p_ == nullptr) return 0;
  ShardPersister* p = p_;
  p_ = nullptr;
  std::lock_guard<std::mutex> lock(p->barrier_mu_);
  --p->active_;
  const uint64_t ticket = marked_ ? ++p->seq_ : 0;
  if (p->active_ == 0 && p->copying_) p->barrier_cv_.notify_all();
  return ticket;
}

ShardPersister::Mutation ShardPersister::Begin() {
  std::unique_lock<std::mutex> lock(barrier_mu_);
  barrier_cv_.wait(lock, [this] { return !copying_; });
  ++active_;
  return Mutation(this);
}

void ShardPersister::MarkEverything() {
  Mutation m = Begin();
  for (int64_t i = 0; i < chunks_->num_chunks(); ++i) m.MarkChunk(i);
  for (WorkerId w = 0; w < num_workers_; ++w) m.MarkWorker(w);
  m.Finish();
}

void ShardPersister::SetOutboundParticipant(OutboundParticipant* participant) {
  std::unique_lock<std::mutex> lock(participant_mu_);
  participant_cv_.wait(lock, [this] { return collected_ == nullptr; });
  participant_ = participant;
}

void ShardPersister::RequestCommit(uint64_t ticket) {
  if (ticket == 0) return;
  std::lock_guard<std::mutex> lock(state_mu_);
  if (ticket <= requested_) return;  // a commit holding it is asked for already
  requested_ = ticket;
  work_cv_.notify_one();
}

Status ShardPersister::AwaitDurable(uint64_t ticket, Deadline deadline) {
  std::unique_lock<std::mutex> lock(state_mu_);
  if (ticket <= durable_) return Status::Ok();
  if (!failure_.ok()) return failure_;
  if (ticket > requested_) {
    requested_ = ticket;
    work_cv_.notify_one();
  }
  durable_cv_.wait_until(lock, deadline.when(), [&] { return ticket <= durable_ || !failure_.ok(); });
  if (ticket <= durable_) return Status::Ok();
  if (!failure_.ok()) return failure_;
  return UnavailableError("shard " + std::to_string(shard_) + ": the commit holding this change was not written to " +
                          store_->name() + " in time (the store is slow); retry");
}

Status ShardPersister::Flush(Deadline deadline) {
  uint64_t last;
  {
    std::lock_guard<std::mutex> lock(barrier_mu_);
    last = seq_;
  }
  return AwaitDurable(last, deadline);
}

Status ShardPersister::failure() const {
  std::lock_guard<std::mutex> lock(state_mu_);
  return failure_;
}

PersisterStats ShardPersister::stats() const {
  std::lock_guard<std::mutex> lock(state_mu_);
  PersisterStats s = stats_;
  const CaptureStats cs = captured_.stats();
  s.chunks_saved = cs.chunks_saved;
  s.peak_saved_bytes = cs.peak_saved_bytes;
  s.commit_latency = commit_hist_.Snapshot();
  return s;
}

void ShardPersister::CommitterLoop() {
  std::unique_lock<std::mutex> lock(state_mu_);
  while (true) {
    work_cv_.wait(lock, [this] { return stop_ || (requested_ > durable_ && failure_.ok()); });
    if (stop_) break;
    lock.unlock();
    CommitOnce();
    lock.lock();
  }
  const bool failed = !failure_.ok();
  lock.unlock();
  if (!failed) CommitOnce();  // what calls left marked without waiting (durability off)
}

uint64_t ShardPersister::Capture() {
  uint64_t captured;
  {
    std::unique_lock<std::mutex> lock(barrier_mu_);
    copying_ = true;
    barrier_cv_.wait(lock, [this] { return active_ == 0; });
    captured = seq_;
  }
  // No mutation is open and none can begin: the marks and the values are
  // those of exactly the tickets <= captured.
  commit_.Clear();
  std::vector<int64_t> locals;
  for (int64_t i = 0; i < chunks_->num_chunks(); ++i) {
    if (chunk_marked_[i].load(std::memory_order_relaxed) == 0) continue;
    chunk_marked_[i].store(0, std::memory_order_relaxed);
    locals.push_back(i);
  }
  captured_.Capture(std::move(locals));  // values stay live, copied only if changed before written
  commit_.deferred_chunks = &captured_;
  for (WorkerId w = 0; w < num_workers_; ++w) {
    if (worker_marked_[w].load(std::memory_order_relaxed) == 0) continue;
    worker_marked_[w].store(0, std::memory_order_relaxed);
    commit_.workers.push_back(tracker_->Record(w));
  }
  {
    std::lock_guard<std::mutex> lock(origin_mu_);
    for (const auto& [origin, seq] : origin_marks_) commit_.origins.push_back({origin, seq});
    origin_marks_.clear();
    commit_.ledger_clears.swap(ledger_clears_);
    commit_.ledger_adds.swap(ledger_adds_);
    commit_.quarantined.swap(quarantined_);
  }
  {
    std::lock_guard<std::mutex> lock(participant_mu_);
    collected_ = participant_;
  }
  if (collected_ != nullptr) {
    commit_.deferred_outbound = collected_->CollectOutbound(&commit_.outbound_puts, &commit_.outbound_deletes);
  }
  commit_.shard_clock = tracker_->ShardClock();
  {
    std::lock_guard<std::mutex> lock(barrier_mu_);
    copying_ = false;
  }
  barrier_cv_.notify_all();
  return captured;
}

void ShardPersister::CommitOnce() {
  const uint64_t captured = Capture();
  const bool empty = commit_.empty();
  const int64_t chunk_bytes = commit_.chunk_elements() * int64_t{sizeof(float)};
  Status s;
  double seconds = 0;
  if (!empty) {
    const auto start = std::chrono::steady_clock::now();
    s = store_->Commit(commit_);
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  captured_.Release();
  if (collected_ != nullptr) {
    collected_->ReleaseOutbound();
    std::lock_guard<std::mutex> lock(participant_mu_);
    collected_ = nullptr;
  }
  participant_cv_.notify_all();
  {
    std::lock_guard<std::mutex> lock(state_mu_);
    if (s.ok()) {
      durable_ = std::max(durable_, captured);
      if (!empty) {
        stats_.commits += 1;
        stats_.bytes += chunk_bytes;
        for (const OutboundRecord& r : commit_.outbound_puts) stats_.bytes += static_cast<int64_t>(r.value.size());
        stats_.seconds += seconds;
        commit_hist_.Observe(seconds);
        stats_.max_seconds = std::max(stats_.max_seconds, seconds);
      }
    } else {
      failure_ = UnavailableError("shard " + std::to_string(shard_) + " cannot persist its state (" + s.ToString() +
                                  "); it takes no more changes until restarted, and what it acknowledged is safe");
    }
  }
  durable_cv_.notify_all();
}

}  // namespace geops::datacenter
