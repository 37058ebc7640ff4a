#include "wan/replication/outer_step.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <string>

namespace geops::wan {
namespace {

// FNV-1a over the bytes of `values`, continuing `digest`.
uint64_t Digest(uint64_t digest, std::span<const float> values) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(values.data());
  for (size_t b = 0; b < values.size() * sizeof(float); ++b) digest = (digest ^ bytes[b]) * 1099511628211ull;
  return digest;
}

std::string Name(ChunkKey key) {
  return "chunk (table " + std::to_string(key.table) + ", chunk " + std::to_string(key.chunk) + ")";
}

}  // namespace

OuterStep::OuterStep(std::vector<SiteId> sites, OuterOptions options)
    : sites_([&] {
        std::sort(sites.begin(), sites.end());
        sites.erase(std::unique(sites.begin(), sites.end()), sites.end());
        return sites;
      }()),
      options_([&] {
        options.fragments = std::max<int64_t>(1, options.fragments);
        return options;
      }()) {}

void OuterStep::InitChunk(ChunkKey key, std::span<const float> values) {
  const bool added = chunks_.count(key) == 0;
  Chunk& c = chunks_[key];
  c.theta.assign(values.begin(), values.end());
  c.m.assign(values.size(), 0.0f);
  if (!added || options_.fragments <= 1) return;
  // Chunks are set in key order, so this is usually the last one: renumber
  // only from the new chunk on.
  int64_t ordinal = 0;
  auto it = chunks_.find(key);
  if (it != chunks_.begin()) ordinal = std::prev(it)->second.ordinal + 1;
  for (; it != chunks_.end(); ++it, ++ordinal) it->second.ordinal = ordinal;
}

bool OuterStep::Covers(int64_t step, ChunkKey key) const {
  auto c = chunks_.find(key);
  if (c == chunks_.end()) return false;
  return options_.fragments <= 1 || c->second.ordinal % options_.fragments == (step - 1) % options_.fragments;
}

bool OuterStep::TakesPart(SiteId site, int64_t step) const {
  auto f = final_step_.find(site);
  return f == final_step_.end() || step <= f->second;
}

// Add's checks of one contribution's chunks against the thetas.
Status OuterStep::CheckChunks(const std::string& what, std::span<const SparseChunkUpdate> chunks) const {
  for (const SparseChunkUpdate& u : chunks) {
    auto c = chunks_.find(u.key);
    if (c == chunks_.end()) return InvalidArgumentError(what + ": " + Name(u.key) + " is not held here");
    if (u.num_elements != c->second.theta.size() || u.indices.size() != u.values.size()) {
      return InvalidArgumentError(what + ": " + Name(u.key) + " has the wrong size");
    }
    for (uint32_t i : u.indices) {
      if (i >= u.num_elements) return InvalidArgumentError(what + ": " + Name(u.key) + " index out of range");
    }
  }
  return Status::Ok();
}

Status OuterStep::Add(int64_t step, SiteId site, std::span<const SparseChunkUpdate> chunks, bool final,
                      ContributionMark mark) {
  const std::string what = "outer step " + std::to_string(step) + " from site " + std::to_string(site);
  if (!std::binary_search(sites_.begin(), sites_.end(), site)) {
    return InvalidArgumentError(what + ": that site is not part of the run");
  }
  if (step < next_) return InvalidArgumentError(what + ": step " + std::to_string(step) + " is applied already");
  const int64_t last = LastGiven(site);
  if (step <= last) return InvalidArgumentError(what + ": that site gave step " + std::to_string(last) + " already");
  if (step != last + 1) {
    return InvalidArgumentError(what + ": that site's next step is " + std::to_string(last + 1));
  }
  if (!TakesPart(site, step)) {
    return InvalidArgumentError(what + ": that site ended at step " + std::to_string(final_step_.at(site)));
  }
  GEOPS_RETURN_IF_ERROR(CheckChunks(what, chunks));
  pending_[step][site].assign(chunks.begin(), chunks.end());
  given_[site] = step;
  if (final) final_step_[site] = step;
  if (mark.known()) {
    pending_marks_[step][site] = mark;
    last_marks_[site] = std::move(mark);
  } else {
    last_marks_.erase(site);
  }
  return Status::Ok();
}

const ContributionMark* OuterStep::MarkOf(int64_t step, SiteId site) const {
  auto p = pending_marks_.find(step);
  if (p == pending_marks_.end()) return nullptr;
  auto m = p->second.find(site);
  return m == p->second.end() ? nullptr : &m->second;
}

const ContributionMark* OuterStep::LastMark(SiteId site) const {
  auto m = last_marks_.find(site);
  return m == last_marks_.end() ? nullptr : &m->second;
}

bool OuterStep::Ready() const {
  if (Finished()) return false;
  auto p = pending_.find(next_);
  for (SiteId s : sites_) {
    if (!TakesPart(s, next_)) continue;
    if (p == pending_.end() || p->second.count(s) == 0) return false;
  }
  return true;
}

bool OuterStep::Finished() const {
  for (SiteId s : sites_) {
    if (TakesPart(s, next_)) return false;
  }
  return true;
}

Status OuterStep::ApplyNext(const std::function<void(ChunkKey, std::span<const float>)>& visit) {
  if (!Ready()) {
    return FailedPreconditionError("outer step " + std::to_string(next_) + " is missing contributions");
  }
  std::map<SiteId, std::vector<SparseChunkUpdate>> given;
  if (auto p = pending_.find(next_); p != pending_.end()) {
    given = std::move(p->second);
    pending_.erase(p);
  }
  pending_marks_.erase(next_);
  // With average_last, the last step (no site goes on after it) averages
  // the sites' models: lr 1, no momentum. The run then ends with the mean
  // of the sites' final models rather than a momentum step past them that
  // no site's training has corrected (docs/wan_replication.md).
  bool last = options_.average_last;
  for (SiteId site : sites_) last = last && !TakesPart(site, next_ + 1);
  const double n = static_cast<double>(sites_.size());
  const double mu = last ? 0.0 : options_.momentum;
  const double lr = last ? 1.0 : options_.lr;
  const bool nesterov = options_.nesterov && !last;
  // Per chunk, the sites' contributions in site order (std::map order).
  std::map<ChunkKey, std::vector<const SparseChunkUpdate*>> by_chunk;
  for (const auto& [site, updates] : given) {
    for (const SparseChunkUpdate& u : updates) by_chunk[u.key].push_back(&u);
  }
  // Streaming: this step's fragment, and what a contribution carries (a
  // final one carries every chunk it still had progress in).
  const int64_t fragment = (next_ - 1) % options_.fragments;
  uint64_t digest = 1469598103934665603ull;  // FNV-1a offset basis
  for (auto& [key, c] : chunks_) {
    const size_t elements = c.theta.size();
    const bool covered = last || c.ordinal % options_.fragments == fragment || by_chunk.count(key) > 0;
    if (!covered) {
      digest = Digest(digest, c.theta);  // not this step's: theta and m stay
      continue;
    }
    sum_.assign(elements, 0.0);
    if (auto b = by_chunk.find(key); b != by_chunk.end()) {
      for (const SparseChunkUpdate* u : b->second) {
        for (size_t j = 0; j < u->indices.size(); ++j) sum_[u->indices[j]] += static_cast<double>(u->values[j]);
      }
    }
    for (size_t i = 0; i < elements; ++i) {
      const double delta = -(sum_[i] / n);
      const double m = mu * static_cast<double>(c.m[i]) + delta;
      const double step = nesterov ? delta + mu * m : m;
      c.m[i] = static_cast<float>(m);
      c.theta[i] = static_cast<float>(static_cast<double>(c.theta[i]) - lr * step);
    }
    digest = Digest(digest, c.theta);
    visit(key, c.theta);
  }
  digests_.push_back(digest);
  ++next_;
  return Status::Ok();
}

std::span<const float> OuterStep::Theta(ChunkKey key) const {
  auto c = chunks_.find(key);
  return c == chunks_.end() ? std::span<const float>() : std::span<const float>(c->second.theta);
}

std::span<const float> OuterStep::Momentum(ChunkKey key) const {
  auto c = chunks_.find(key);
  return c == chunks_.end() ? std::span<const float>() : std::span<const float>(c->second.m);
}

Status OuterStep::CheckState(const State& state) const {
  auto known = [this](SiteId s) { return std::binary_search(sites_.begin(), sites_.end(), s); };
  auto lost = [](const std::string& what) { return DataLossError("outer state: " + what); };
  if (state.next_step < 1) return lost("next step " + std::to_string(state.next_step));
  if (static_cast<int64_t>(state.digests.size()) > state.next_step - 1) {
    return lost(std::to_string(state.digests.size()) + " digests for " + std::to_string(state.next_step - 1) +
                " steps applied");
  }
  for (const auto& [site, step] : state.given) {
    if (!known(site)) return lost("site " + std::to_string(site) + " is not part of the run");
    if (step < 0) return lost("site " + std::to_string(site) + " gave step " + std::to_string(step));
    if (step >= state.next_step) {
      auto p = state.pending.find(step);
      if (p == state.pending.end() || p->second.count(site) == 0) {
        return lost("site " + std::to_string(site) + " gave step " + std::to_string(step) +
                    ", not applied, but its contribution is not held");
      }
    }
  }
  for (const auto& [site, step] : state.final_step) {
    auto g = state.given.find(site);
    if (g == state.given.end() || g->second != step) {
      return lost("site " + std::to_string(site) + " ended at step " + std::to_string(step) +
                  " but its last step given is not that");
    }
  }
  if (state.theta.size() != chunks_.size() || state.momentum.size() != chunks_.size()) {
    return lost(std::to_string(state.theta.size()) + " theta and " + std::to_string(state.momentum.size()) +
                " momentum rows for " + std::to_string(chunks_.size()) + " chunks");
  }
  for (const auto& [key, c] : chunks_) {
    auto t = state.theta.find(key);
    auto m = state.momentum.find(key);
    if (t == state.theta.end() || m == state.momentum.end()) return lost(Name(key) + " has no theta or momentum");
    if (t->second.size() != c.theta.size() || m->second.size() != c.theta.size()) {
      return lost(Name(key) + " has " + std::to_string(t->second.size()) + " theta and " +
                  std::to_string(m->second.size()) + " momentum values, expected " + std::to_string(c.theta.size()));
    }
    for (size_t i = 0; i < c.theta.size(); ++i) {
      if (!std::isfinite(t->second[i]) || !std::isfinite(m->second[i])) {
        return lost(Name(key) + " element " + std::to_string(i) + " is not finite");
      }
    }
  }
  for (const auto& [step, sites] : state.pending) {
    if (step < state.next_step) return lost("a contribution to step " + std::to_string(step) + ", applied already");
    for (const auto& [site, chunks] : sites) {
      const std::string what = "outer step " + std::to_string(step) + " from site " + std::to_string(site);
      auto g = state.given.find(site);
      if (!known(site) || g == state.given.end() || g->second < step) {
        return lost(what + ": beyond the last step that site gave");
      }
      Status s = CheckChunks(what, chunks);
      if (!s.ok()) return lost(s.message());
    }
  }
  for (const auto& [step, sites] : state.pending_marks) {
    auto p = state.pending.find(step);
    for (const auto& [site, mark] : sites) {
      if (p == state.pending.end() || p->second.count(site) == 0 || !mark.known()) {
        return lost("a mark of site " + std::to_string(site) + "'s contribution to step " + std::to_string(step) +
                    ", which is not held");
      }
    }
  }
  for (const auto& [site, mark] : state.last_marks) {
    if (!known(site) || state.given.count(site) == 0 || !mark.known()) {
      return lost("a last mark of site " + std::to_string(site) + ", which gave nothing");
    }
  }
  return Status::Ok();
}

Status OuterStep::Import(State state) {
  GEOPS_RETURN_IF_ERROR(CheckState(state));
  for (auto& [key, c] : chunks_) {
    c.theta = std::move(state.theta[key]);
    c.m = std::move(state.momentum[key]);
  }
  next_ = state.next_step;
  given_ = std::move(state.given);
  final_step_ = std::move(state.final_step);
  digests_ = std::move(state.digests);
  pending_ = std::move(state.pending);
  pending_marks_ = std::move(state.pending_marks);
  last_marks_ = std::move(state.last_marks);
  return Status::Ok();
}

OuterStep::State OuterStep::Export() const {
  State state;
  state.next_step = next_;
  state.given = given_;
  state.final_step = final_step_;
  state.digests = digests_;
  for (const auto& [key, c] : chunks_) {
    state.theta[key] = c.theta;
    state.momentum[key] = c.m;
  }
  state.pending = pending_;
  state.pending_marks = pending_marks_;
  state.last_marks = last_marks_;
  return state;
}

namespace {

bool SameBits(const std::vector<SparseChunkUpdate>& a, const std::vector<SparseChunkUpdate>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!(a[i].key == b[i].key) || a[i].num_elements != b[i].num_elements || a[i].indices != b[i].indices ||
        a[i].values.size() != b[i].values.size() ||
        std::memcmp(a[i].values.data(), b[i].values.data(), a[i].values.size() * sizeof(float)) != 0) {
      return false;
    }
  }
  return true;
}

}  // namespace

Result<OuterStep::MergeResult> OuterStep::Merge(const State& other) {
  auto lost = [](const std::string& what) { return DataLossError("merging a peer's outer state: " + what); };
  if (Status s = CheckState(other); !s.ok()) return lost(s.message());
  const size_t common = std::min(digests_.size(), other.digests.size());
  for (size_t i = 0; i < common; ++i) {
    if (digests_[i] != other.digests[i]) {
      return lost("the synchronised models differ after step " + std::to_string(i + 1));
    }
  }
  // The step from which contributions count: the later of the two.
  const int64_t next = std::max(next_, other.next_step);
  // Every contribution both hold must be the same bits.
  for (const auto& [step, sites] : other.pending) {
    if (step < next) continue;
    auto mine = pending_.find(step);
    if (mine == pending_.end()) continue;
    for (const auto& [site, chunks] : sites) {
      auto c = mine->second.find(site);
      if (c != mine->second.end() && !SameBits(c->second, chunks)) {
        return lost("site " + std::to_string(site) + "'s contribution to step " + std::to_string(step) +
                    " differs from the one held here");
      }
    }
  }
  // A site's contributions form one stream: what `other` adds must follow
  // on from what is held here (or applied), with no step missing.
  for (const auto& [site, last] : other.given) {
    int64_t held = std::max(LastGiven(site), next - 1);
    if (auto f = final_step_.find(site); f != final_step_.end()) held = std::max(held, f->second);
    for (int64_t step = std::max(held + 1, next); step <= last; ++step) {
      auto p = other.pending.find(step);
      if (p == other.pending.end() || p->second.count(site) == 0) {
        return lost("site " + std::to_string(site) + "'s contribution to step " + std::to_string(step) +
                    " is held by neither");
      }
    }
  }
  for (const auto& [site, step] : other.final_step) {
    auto f = final_step_.find(site);
    if (f != final_step_.end() && f->second != step) {
      return lost("site " + std::to_string(site) + " ended at step " + std::to_string(f->second) + " here and at " +
                  std::to_string(step) + " there");
    }
  }
  // Checked: now change.
  MergeResult result;
  if (other.next_step > next_) {
    result.skipped_from = next_;
    result.skipped_to = other.next_step - 1;
    for (auto& [key, c] : chunks_) {
      c.theta = other.theta.at(key);
      c.m = other.momentum.at(key);
    }
    digests_ = other.digests;
    for (auto it = pending_.begin(); it != pending_.end() && it->first < other.next_step;) {
      for (const auto& [site, chunks] : it->second) result.dropped.emplace_back(it->first, site);
      pending_marks_.erase(it->first);
      it = pending_.erase(it);
    }
    next_ = other.next_step;
  }
  for (const auto& [step, sites] : other.pending) {
    if (step < next_) continue;
    for (const auto& [site, chunks] : sites) {
      auto& slot = pending_[step];
      if (slot.count(site) > 0) continue;
      slot.emplace(site, chunks);
      result.added.emplace_back(step, site);
      if (auto m = other.pending_marks.find(step); m != other.pending_marks.end()) {
        if (auto sm = m->second.find(site); sm != m->second.end()) pending_marks_[step][site] = sm->second;
      }
    }
  }
  for (const auto& [site, step] : other.given) {
    const int64_t mine = LastGiven(site);
    auto theirs = other.last_marks.find(site);
    if (step > mine || (step == mine && last_marks_.count(site) == 0)) {
      if (theirs != other.last_marks.end()) {
        last_marks_[site] = theirs->second;
      } else if (step > mine) {
        last_marks_.erase(site);
      }
    }
    given_[site] = std::max(mine, step);
  }
  for (const auto& [site, step] : other.final_step) final_step_[site] = step;
  return result;
}

const std::vector<SparseChunkUpdate>* OuterStep::Contribution(int64_t step, SiteId site) const {
  auto p = pending_.find(step);
  if (p == pending_.end()) return nullptr;
  auto c = p->second.find(site);
  return c == p->second.end() ? nullptr : &c->second;
}

std::vector<ChunkKey> OuterStep::Chunks() const {
  std::vector<ChunkKey> out;
  out.reserve(chunks_.size());
  for (const auto& [key, c] : chunks_) out.push_back(key);
  return out;
}

}  // namespace geops::wan
