// MirrorGate: the WAN layer's hold on local reads (a geops::ReadGate).
//
// A read of some chunks waits while any of these holds:
//   final    every local worker has finished and some peer has not yet
//            drained (its final batch is not applied here): the read is the
//            evaluator's, and it must see the final model;
//   drift    own shard clock - min(mirror clocks) > DS + allowance (mirror
//            clock; DS < 0 disables it). The allowance (SetDriftAllowance,
//            0 by default) is what the owner grants for the clocks a peer's
//            report spends on the way: the bound the gate enforces is
//            DS + allowance, recorded as max_bound_clocks. Mirror clocks count only live peers (heard within
//            the lease) that have not drained and are in step; a drained
//            peer never holds anyone back. A peer silent past the lease is
//            recorded as down (PeerDownEvent); when it is heard again it
//            counts from its next clock report on (not from the first
//            heartbeat: the clock it reported before the silence is old,
//            and a link back from an outage delivers the held reports a
//            moment later; without a report within a lease it counts at
//            its old clock), with the clock it then reports, even if lower
//            than before (a site that restarted from its store resumes at its
//            last durable clock, a few clocks back: the others wait at DS
//            while it catches up). A peer that lost its store and starts
//            over at clock 0 (ResetPeer) is catching up instead: it stays
//            out of the mirror clock until it reports a clock within DS of
//            this site's, so its replay never stalls the others;
//   notice   a requested chunk is under a selective-barrier notice whose
//            batch has not landed and whose timeout has not passed;
//   outer    (avg, diloco: SetOuterPeriod(P, L)) own shard clock c needs
//            outer step floor(c / P) - L and an earlier one is the last
//            applied: with P = H and L = 1, one step may be in flight while
//            the next H clocks run, not two; with L = 0 (no overlap) a read
//            at clock c waits for step floor(c / H) itself; streaming with
//            F fragments (P = H / F, L = F) lets one step of every fragment be in
//            flight, each for H clocks. Once every local worker finished,
//            `final` also waits for the last outer step (OnOuterStep's
//            `outstanding`).
// It wakes on every change and at least every kPollMs (leases and notice
// timeouts are evaluated lazily). Waits are accounted per reason.
//
// Peers are named by site id and start at clock 0, heard at creation.
//
// Thread-safety: all methods may be called concurrently; one mutex guards
// all state and is never held while calling out.
#ifndef GEOPS_WAN_REPLICATION_MIRROR_GATE_H_
#define GEOPS_WAN_REPLICATION_MIRROR_GATE_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "common/deadline.h"
#include "common/histogram.h"
#include "common/ids.h"
#include "common/replication.h"
#include "common/status.h"
#include "common/time_source.h"

namespace geops::wan {

// A peer that went silent for longer than the lease (a failed site), and
// when it was heard again.
struct PeerDownEvent {
  SiteId peer = 0;
  double last_heard_unix = 0;  // last message before the silence
  double detected_unix = 0;    // when the gate dropped it from the mirror clock
  double back_unix = 0;        // heard again; 0 while still down
  double in_step_unix = 0;     // after a reset: back within DS, in the mirror clock again; 0: not yet
};

struct GateStats {
  double drift_wait_seconds = 0;   // reads held by the mirror clock
  double notice_wait_seconds = 0;  // reads held by selective-barrier notices
  double final_wait_seconds = 0;   // reads held for the peers' final batches
  double outer_wait_seconds = 0;   // reads held for an outer step (avg, diloco)
  int64_t reads_held = 0;          // reads that waited at all
  int64_t reads_timed_out = 0;
  int64_t notices = 0;             // notices received
  int64_t notices_expired = 0;     // notices whose batch had not landed in time
  // Largest drift admitted: own clock - min mirror clock of a read that
  // passed, or new clock - 1 - min mirror clock of an advance that passed
  // (the clock the site then works in). Never above max_bound_clocks when
  // DS >= 0.
  int64_t max_drift_clocks = 0;
  int64_t max_bound_clocks = 0;    // largest DS + allowance in force; -1: no drift bound
  HistogramSnapshot hold_wait;     // per read or advance held at all: how long (any reason)
  std::vector<PeerDownEvent> down_events;
};

class MirrorGate : public ReadGate {
 public:
  // `peers`: the other sites. ds < 0: no drift bound. lease > 0. `time`
  // (null: SystemTime()) runs the peer leases, notices and waits; it must
  // outlive the gate.
  MirrorGate(std::vector<SiteId> peers, int64_t ds, std::chrono::milliseconds lease,
             const TimeSource* time = nullptr);

  void Interrupt(const std::string& why) override;
  Status WaitReadable(std::span<const ChunkKey> keys, Clock shard_clock, bool site_finished,
                      Deadline deadline, double* waited) override;
  // The drift bound on clock advances: a worker may end iteration
  // new_clock - 1 only while new_clock - 1 - min(mirror clocks) <= DS, so no
  // site finishes an iteration more than DS clocks ahead of the slowest
  // live peer (DS < 0: never held). Counted as drift wait.
  Status WaitAdvance(Clock new_clock, Deadline deadline, double* waited) override;

  // Clocks the drift bound allows beyond DS from now on (>= 0; ignored when
  // DS < 0).
  void SetDriftAllowance(int64_t clocks);
  // DS + the allowance; -1 when unbounded.
  int64_t DriftBound() const;

  // Own shard clock (the largest seen) and whether every local worker finished.
  void SetOwnClock(Clock clock, bool local_finished);
  // A peer's clock, taken once its batches through the report's last_seq
  // were applied. `drained`: it sends nothing more.
  void OnPeerClock(SiteId peer, Clock clock, bool drained);
  // Anything heard from the peer renews its lease.
  void OnPeerHeard(SiteId peer);
  // Batches of `peer` through `seq` are applied: their notices are released.
  void OnPeerApplied(SiteId peer, uint64_t seq);
  // Holds reads of `keys` until batch `seq` of `peer` is applied, or
  // timeout_ms. Ignored when that batch is applied already.
  void AddNotice(SiteId peer, uint64_t seq, std::span<const ChunkKey> keys, int64_t timeout_ms);

  // The peer came back as a new incarnation (it lost its store) and its
  // stream starts over: its applied seq, notices and drained mark are
  // forgotten, its clock is 0 and its next report is taken as is, and it
  // is catching up (out of the mirror clock until within DS).
  void ResetPeer(SiteId peer);

  // avg, diloco: an outer step every `period` clocks, of which `in_flight`
  // (>= 0; 0: none, the synchronous step) may be unapplied, gates reads
  // (period 0: none).
  void SetOuterPeriod(int64_t period, int64_t in_flight = 1);
  // Outer steps 1..applied are applied; `outstanding`: a contribution waits
  // for a step not applied yet (or this site's final one is still to come).
  void OnOuterStep(int64_t applied, bool outstanding);

  // Every peer has drained and its final batch is applied (with an outer
  // step: and the last one applied).
  bool AllPeersDrained() const;
  // Blocks until AllPeersDrained() or the deadline; false on timeout.
  bool WaitAllPeersDrained(Deadline deadline) const;
  // Min clock over live, undrained peers; own clock when there is none.
  Clock MinMirrorClock() const;
  // Own clock is within DS (0 when unbounded) of the clock of every live,
  // undrained peer, and each of those has reported a clock since this gate
  // was created: a restarted site is back in step.
  bool CaughtUp() const;
  GateStats stats() const;
  // Chunks under a live notice now (tests and inspection).
  std::vector<ChunkKey> NoticedChunks() const;

 private:
  static constexpr int64_t kPollMs = 50;

  struct Peer {
    Clock clock = 0;
    bool drained = false;
    bool reported = false;   // a clock report arrived
    bool down = false;       // silent past the lease (recorded in down_events)
    bool rejoining = false;  // heard again after being down: take its next clock as is
    bool catching_up = false;  // reset (lost its store): out of the mirror clock until within DS
    bool awaiting_report = false;  // back from down: out of the mirror clock until it reports
    uint64_t applied = 0;
    SteadyClock::time_point heard;
    SteadyClock::time_point back;  // when it was last heard again after being down
  };
  struct Notice {
    SiteId peer = 0;
    uint64_t seq = 0;
    SteadyClock::time_point expiry;
  };
  enum class Hold { kNone, kFinal, kDrift, kNotice, kOuter };

  // Whether `p` holds the mirror clock now: live (heard within the lease),
  // not drained, not catching up after a reset, and, when it was down,
  // reported since it was heard again (or heard again a lease ago: a peer
  // that makes no progress sends no report, and it must hold the others
  // back at its last clock, not fall out of the bound).
  bool CountsLocked(const Peer& p, SteadyClock::time_point now) const {
    return !p.drained && !p.catching_up && !(p.awaiting_report && now - p.back <= lease_) &&
           now - p.heard <= lease_;
  }
  Clock MinMirrorLocked(SteadyClock::time_point now) const;
  int64_t BoundLocked() const { return ds_ < 0 ? -1 : ds_ + allowance_; }
  // Notes the drift of a read or advance that passes.
  void AdmittedLocked(int64_t drift);
  // Records peers that fell silent past the lease.
  void RefreshLivenessLocked(SteadyClock::time_point now) const;
  // The peer sent something: renews its lease, ends a down event.
  Peer& HeardLocked(SiteId peer, SteadyClock::time_point now);
  Hold HoldLocked(std::span<const ChunkKey> keys, SteadyClock::time_point now);
  bool AllDrainedLocked() const;
  std::string DescribeLocked(Hold hold, std::span<const ChunkKey> keys, SteadyClock::time_point now) const;

  const int64_t ds_;
  const std::chrono::milliseconds lease_;
  const TimeSource* const time_;

  mutable std::mutex mu_;
  std::string interrupted_;  // GUARDED_BY(mu_); non-empty after Interrupt()
  mutable std::condition_variable changed_;
  Clock own_clock_ = 0;                      // GUARDED_BY(mu_)
  int64_t allowance_ = 0;                    // GUARDED_BY(mu_)
  bool local_finished_ = false;              // GUARDED_BY(mu_)
  mutable std::map<SiteId, Peer> peers_;     // GUARDED_BY(mu_); liveness refreshed lazily
  std::multimap<ChunkKey, Notice> notices_;  // GUARDED_BY(mu_)
  int64_t outer_period_ = 0;                 // GUARDED_BY(mu_)
  int64_t outer_in_flight_ = 1;              // GUARDED_BY(mu_)
  int64_t outer_applied_ = 0;                // GUARDED_BY(mu_)
  bool outer_outstanding_ = false;           // GUARDED_BY(mu_)
  mutable GateStats stats_;                  // GUARDED_BY(mu_)
  Histogram hold_wait_;                      // lock-free
};

}  // namespace geops::wan

#endif  // GEOPS_WAN_REPLICATION_MIRROR_GATE_H_
