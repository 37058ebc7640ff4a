#include "wan/replication/clock_reporter.h"

#include <algorithm>
#include <chrono>

namespace geops::wan {

ClockReporter::ClockReporter(const WanOptions& options, SiteId site, WanTransport* transport, size_t peers)
    : options_(options), site_(site), transport_(transport), last_(peers), held_since_(peers) {}

bool ClockReporter::FlushDue(size_t i, SteadyClock::time_point now) const {
  return held_since_[i] && now - *held_since_[i] >= std::chrono::milliseconds(kFlushMs);
}

bool ClockReporter::Due(const Round& round) const {
  if (round.tick || round.finishing || round.backlog_tied) return true;
  for (size_t i = 0; i < held_since_.size(); ++i) {
    if (FlushDue(i, round.now)) return true;
  }
  return false;
}

ClockReporter::Outcome ClockReporter::Report(const Round& round, const std::vector<PeerView>& peers,
                                             const Ride& ride) {
  Outcome outcome;
  // Each peer is skipped unless the round is Due() for it.
  for (size_t i = 0; i < peers.size() && i < last_.size(); ++i) {
    const PeerView& peer = peers[i];
    std::optional<WanClockReport>& last = last_[i];
    const bool flush = FlushDue(i, round.now);
    Clock clock = round.k;
    if (round.backlog_tied) {
      clock = peer.sent_through;
      if (round.held_since) clock = std::min(clock, *round.held_since - 1);
      if (options_.tie_backlog_clocks > 0) clock = std::max(clock, round.k - options_.tie_backlog_clocks);
      clock = std::max(clock, last ? last->clock : Clock{0});
      if (!round.tick && !flush && (!last || clock <= last->clock)) continue;
    } else if (!round.tick && !round.finishing && !flush) {
      continue;
    }
    // report_every_clocks: a report that moves the peer's view less than
    // that many clocks waits for a later one, or for the flush.
    if (options_.report_every_clocks > 1 && !round.finishing && !round.was_drained && last && !last->drained &&
        clock < last->clock + options_.report_every_clocks && !flush) {
      if (clock > last->clock) {
        if (!held_since_[i]) held_since_[i] = round.now;
        ++outcome.held;
      }
      continue;
    }
    held_since_[i].reset();
    if (!round.finishing && !round.was_drained && last && clock <= last->clock && !round.tick) continue;
    // bsp and the outer-step modes tie the clock to the batches sent (a
    // peer takes it once they landed); asp and all-async report progress at
    // once, unless told to tie as well (WanOptions::tie_reports). The drain
    // always ties: "drained" means "you have everything". Once drained,
    // every later report says so too: a peer that restarts is sent the last
    // report again, and it must still say that nothing more will come.
    const bool drained_to = (round.finishing || round.was_drained) && peer.nothing_waits;
    outcome.all_drained = outcome.all_drained && drained_to;
    const bool tied = round.finishing || round.was_drained || options_.tie_reports ||
                      options_.mode == WanMode::kBsp || UsesOuterStep(options_.mode);
    const WanClockReport report{site_,      clock, tied ? peer.last_seq : 0, drained_to, round.incarnation,
                                peer.peer_incarnation};
    if (ride && ride(peer.peer, report)) {
      ++outcome.riding;
    } else {
      transport_->SendClock(peer.peer, report);
    }
    ++outcome.sent;
    last = report;
  }
  return outcome;
}

std::optional<WanClockReport> ClockReporter::SendAgain(size_t i, SiteId peer) {
  if (i >= last_.size() || !last_[i]) return std::nullopt;
  transport_->SendClock(peer, *last_[i]);
  return last_[i];
}

}  // namespace geops::wan
