#include "wan/replication/outer_step.h"

#include <algorithm>
#include <string>

namespace geops::wan {
namespace {

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
      options_(options) {}

void OuterStep::InitChunk(ChunkKey key, std::span<const float> values) {
  Chunk& c = chunks_[key];
  c.theta.assign(values.begin(), values.end());
  c.m.assign(values.size(), 0.0f);
}

bool OuterStep::TakesPart(SiteId site, int64_t step) const {
  auto f = final_step_.find(site);
  return f == final_step_.end() || step <= f->second;
}

Status OuterStep::Add(int64_t step, SiteId site, std::span<const SparseChunkUpdate> chunks, bool final) {
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
  pending_[step][site].assign(chunks.begin(), chunks.end());
  given_[site] = step;
  if (final) final_step_[site] = step;
  return Status::Ok();
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
  uint64_t digest = 1469598103934665603ull;  // FNV-1a offset basis
  for (auto& [key, c] : chunks_) {
    const size_t elements = c.theta.size();
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
    const auto* bytes = reinterpret_cast<const unsigned char*>(c.theta.data());
    for (size_t b = 0; b < elements * sizeof(float); ++b) digest = (digest ^ bytes[b]) * 1099511628211ull;
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

}  // namespace geops::wan
