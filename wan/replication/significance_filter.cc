#include "wan/replication/significance_filter.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <string>

#include "common/float_kernels.h"
#include "wan/codec/float_scan.h"

namespace geops::wan {
namespace {

// SelectFresh looks at a chunk whole once more than 1/kWholeLookShare of
// its elements are marked.
constexpr uint64_t kWholeLookShare = 8;

std::string KeyName(ChunkKey key) {
  return "chunk (" + std::to_string(key.table) + ", " + std::to_string(key.chunk) + ")";
}

}  // namespace

Status SignificanceFilterOptions::Validate() const {
  if (!(value_epsilon > 0.0f) || !std::isfinite(value_epsilon)) {
    return InvalidArgumentError("significance filter: value_epsilon must be > 0 and finite, got " +
                                std::to_string(value_epsilon));
  }
  if (max_hold_clocks < 0) {
    return InvalidArgumentError("significance filter: max_hold_clocks must be >= 0, got " +
                                std::to_string(max_hold_clocks));
  }
  if (max_chunk_elements == 0) {
    return InvalidArgumentError("significance filter: max_chunk_elements must be > 0");
  }
  return Status::Ok();
}

Result<SignificanceFilter> SignificanceFilter::Create(SignificanceFilterOptions options) {
  GEOPS_RETURN_IF_ERROR(options.Validate());
  return SignificanceFilter(options);
}

Result<SignificanceFilter::Slot*> SignificanceFilter::SlotFor(ChunkKey key, uint32_t num_elements) {
  if (num_elements == 0) {
    return InvalidArgumentError(KeyName(key) + ": empty update");
  }
  if (num_elements > options_.max_chunk_elements) {
    return InvalidArgumentError(KeyName(key) + ": " + std::to_string(num_elements) +
                                " elements exceeds max_chunk_elements " +
                                std::to_string(options_.max_chunk_elements));
  }
  auto it = slots_.find(key);
  if (it != slots_.end()) {
    if (it->second.acc.size() != num_elements) {
      return InvalidArgumentError(KeyName(key) + ": update has " + std::to_string(num_elements) +
                                  " elements but the chunk has " +
                                  std::to_string(it->second.acc.size()));
    }
    return &it->second;
  }
  Slot& slot = slots_[key];
  slot.acc.assign(num_elements, 0.0f);
  accumulator_bytes_ += int64_t{num_elements} * 4;
  if (scratch_idx_.size() < num_elements) {
    scratch_idx_.resize(num_elements);
    scratch_val_.resize(num_elements);
    scratch_at_.resize(num_elements);
    scratch_w_.resize(num_elements);
  }
  return &slot;
}

void SignificanceFilter::MarkDirty(ChunkKey key, Slot* slot) {
  if (!slot->dirty) {
    slot->dirty = true;
    slot->dirty_since = -1;
    dirty_.emplace_back(key, slot);
  }
}

Status SignificanceFilter::Add(ChunkKey key, std::span<const float> delta) {
  int64_t bad = FirstNonFinite(delta.data(), static_cast<int64_t>(delta.size()));
  if (bad >= 0) {
    return InvalidArgumentError(KeyName(key) + ": delta element " + std::to_string(bad) +
                                " is not finite");
  }
  return AddFinite(key, delta);
}

Status SignificanceFilter::AddFinite(ChunkKey key, std::span<const float> delta) {
  if (delta.size() > options_.max_chunk_elements) {
    return InvalidArgumentError(KeyName(key) + ": " + std::to_string(delta.size()) +
                                " elements exceeds max_chunk_elements");
  }
  std::lock_guard<std::mutex> lock(*mu_);
  GEOPS_ASSIGN_OR_RETURN(Slot * slot, SlotFor(key, static_cast<uint32_t>(delta.size())));
  WillWrite(key, slot->acc);
  AddInto(slot->acc.data(), delta.data(), static_cast<int64_t>(delta.size()));
  MarkDirty(key, slot);
  return Status::Ok();
}

Status SignificanceFilter::AddSparse(ChunkKey key, uint32_t num_elements,
                                     std::span<const uint32_t> indices,
                                     std::span<const float> values, bool fresh) {
  if (indices.size() != values.size()) {
    return InvalidArgumentError(KeyName(key) + ": " + std::to_string(indices.size()) +
                                " indices but " + std::to_string(values.size()) + " values");
  }
  for (size_t i = 0; i < indices.size(); ++i) {
    if (indices[i] >= num_elements) {
      return InvalidArgumentError(KeyName(key) + ": index " + std::to_string(indices[i]) +
                                  " >= chunk size " + std::to_string(num_elements));
    }
  }
  int64_t bad = FirstNonFinite(values.data(), static_cast<int64_t>(values.size()));
  if (bad >= 0) {
    return InvalidArgumentError(KeyName(key) + ": value " + std::to_string(bad) + " is not finite");
  }
  std::lock_guard<std::mutex> lock(*mu_);
  GEOPS_ASSIGN_OR_RETURN(Slot * slot, SlotFor(key, num_elements));
  if (indices.empty()) return Status::Ok();
  WillWrite(key, slot->acc);
  float* acc = slot->acc.data();
  for (size_t i = 0; i < indices.size(); ++i) acc[indices[i]] += values[i];
  if (fresh) {
    if (slot->fresh.empty()) slot->fresh.assign((slot->acc.size() + 63) / 64, 0);
    for (uint32_t i : indices) {
      uint64_t& word = slot->fresh[i / 64];
      const uint64_t bit = uint64_t{1} << (i % 64);
      slot->marked += (word & bit) == 0 ? 1u : 0u;
      word |= bit;
    }
  }
  MarkDirty(key, slot);
  return Status::Ok();
}

void SignificanceFilter::ClearFresh(Slot* slot) {
  if (slot->marked == 0) return;
  std::fill(slot->fresh.begin(), slot->fresh.end(), 0);
  slot->marked = 0;
}

SelectStats SignificanceFilter::Select(Clock clock, const ChunkValueLookup& lookup, float threshold,
                                       std::vector<SparseChunkUpdate>* out, const SelectSlice& slice) {
  if (!(threshold >= 0.0f)) threshold = 0.0f;  // NaN or negative: take all non-zero
  return Scan(clock, lookup ? &lookup : nullptr, nullptr, threshold, /*take_all=*/false, Revisit{}, slice,
              out);
}

SelectStats SignificanceFilter::SelectFresh(Clock clock, const ChunkValueLookup& lookup,
                                            const ChunkElementLookup& elements, float threshold, int64_t revisit,
                                            std::vector<SparseChunkUpdate>* out, const SelectSlice& slice,
                                            int64_t revisit_clocks) {
  if (!(threshold >= 0.0f)) threshold = 0.0f;
  return Scan(clock, lookup ? &lookup : nullptr, elements ? &elements : nullptr, threshold, /*take_all=*/false,
              Revisit{revisit, revisit_clocks}, slice, out);
}

SelectStats SignificanceFilter::DrainAll(std::vector<SparseChunkUpdate>* out, const SelectSlice& slice) {
  return Scan(0, nullptr, nullptr, 0.0f, /*take_all=*/true, Revisit{}, slice, out);
}

SelectStats SignificanceFilter::Scan(Clock clock, const ChunkValueLookup* lookup,
                                     const ChunkElementLookup* elements, float threshold, bool take_all,
                                     Revisit revisit_at, const SelectSlice& slice,
                                     std::vector<SparseChunkUpdate>* out) {
  const int64_t revisit = revisit_at.looks;
  std::lock_guard<std::mutex> lock(*mu_);
  SelectStats stats;
  std::sort(dirty_.begin(), dirty_.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  size_t used = 0;
  size_t still_dirty = 0;
  for (size_t at = 0; at < dirty_.size(); ++at) {
    // Copies: the kept entries are written back over the visited ones.
    const ChunkKey key = dirty_[at].first;
    Slot* const slot_at = dirty_[at].second;
    const bool before = slice.has_after && !(slice.after < key);
    const bool past = slice.max_elements > 0 && stats.elements_selected >= slice.max_elements;
    const bool other = slice.only && !slice.only(key);
    if (before || past || other) {
      // Outside this slice: stays dirty, untouched.
      stats.more = stats.more || past;
      dirty_[still_dirty++] = {key, slot_at};
      continue;
    }
    stats.last = key;
    Slot& slot = *slot_at;
    const uint32_t n = static_cast<uint32_t>(slot.acc.size());
    if (slot.dirty_since < 0) slot.dirty_since = clock;
    bool whole = take_all || (options_.max_hold_clocks > 0 &&
                              clock - slot.dirty_since >= options_.max_hold_clocks);
    // SelectFresh: only the marked elements, but the whole chunk at every
    // revisit-th look (the first look's turn set by the key, so that chunks
    // take turns), and with revisit_at.clocks not twice within that many
    // clocks.
    bool partial = false;
    if (revisit > 1 && !whole) {
      if (slot.looks_since_whole < 0) {
        slot.looks_since_whole = static_cast<int64_t>(ChunkKeyHash()(key) % static_cast<uint64_t>(revisit));
        slot.last_whole = clock - revisit_at.clocks;
      }
      partial = ++slot.looks_since_whole < revisit || clock < slot.last_whole + revisit_at.clocks;
    }
    if (partial && slot.marked == 0) {
      dirty_[still_dirty++] = {key, slot_at};  // nothing marked: nothing to look at
      continue;
    }
    if (partial) {
      // Element by element costs several times a streaming look per
      // element: past an eighth of the chunk marked, look at it whole.
      partial = uint64_t{slot.marked} * kWholeLookShare <= n;
    }
    const float* w = (whole || lookup == nullptr || (partial && elements != nullptr)) ? nullptr : (*lookup)(key);
    float t = whole ? 0.0f : threshold;
    WillWrite(key, slot.acc);
    ScanResult r;
    if (partial) {
      uint32_t count = 0;
      for (size_t word = 0; word < slot.fresh.size(); ++word) {
        for (uint64_t bits = slot.fresh[word]; bits != 0; bits &= bits - 1) {
          scratch_at_[count++] = static_cast<uint32_t>(word * 64 + static_cast<size_t>(std::countr_zero(bits)));
        }
      }
      // The marks stay until the chunk's next whole look: what is not
      // significant now is looked at again by the next call.

      // The values of the marked elements, in list order; null: unknown.
      const float* w_at = nullptr;
      if (elements != nullptr) {
        if ((*elements)(key, std::span<const uint32_t>(scratch_at_.data(), count), scratch_w_.data())) {
          w_at = scratch_w_.data();
        }
      } else if (w != nullptr) {
        for (uint32_t k = 0; k < count; ++k) scratch_w_[k] = w[scratch_at_[k]];
        w_at = scratch_w_.data();
      }
      r.taken = SelectListed(slot.acc.data(), w_at, scratch_at_.data(), count, t, options_.value_epsilon,
                             scratch_idx_.data(), scratch_val_.data());
      r.any_left = true;  // not looked at whole: may still hold mass
      ++stats.chunks_scanned;
      stats.elements_scanned += count;
    } else if (w != nullptr) {
      r = SelectRelative(slot.acc.data(), w, n, t, options_.value_epsilon, scratch_idx_.data(),
                         scratch_val_.data());
    } else {
      r = SelectAbsolute(slot.acc.data(), n, t * options_.value_epsilon, scratch_idx_.data(),
                         scratch_val_.data());
    }
    if (!partial) {
      ClearFresh(&slot);
      if (revisit > 1) {
        slot.looks_since_whole = 0;
        slot.last_whole = clock;
      }
      ++stats.chunks_scanned;
      stats.elements_scanned += n;
    }
    if (r.taken > 0) {
      if (used == out->size()) out->emplace_back();
      SparseChunkUpdate& u = (*out)[used++];
      u.key = key;
      u.num_elements = n;
      u.indices.assign(scratch_idx_.data(), scratch_idx_.data() + r.taken);
      u.values.assign(scratch_val_.data(), scratch_val_.data() + r.taken);
      ++stats.chunks_selected;
      stats.elements_selected += r.taken;
    }
    if (r.any_left) {
      dirty_[still_dirty++] = {key, slot_at};
    } else {
      slot.dirty = false;
      slot.dirty_since = -1;
    }
  }
  dirty_.resize(still_dirty);
  out->resize(used);
  stats.chunks_still_dirty = static_cast<int64_t>(still_dirty);
  return stats;
}

double SignificanceFilter::ResidualNorm() const {
  double sum = 0;
  for (const auto& [key, slot] : slots_) {
    for (float v : slot.acc) sum += static_cast<double>(v) * v;
  }
  return std::sqrt(sum);
}

std::span<const float> SignificanceFilter::Accumulated(ChunkKey key) const {
  auto it = slots_.find(key);
  if (it == slots_.end()) return {};
  return it->second.acc;
}

void SignificanceFilter::ReleaseCleanChunks() {
  std::lock_guard<std::mutex> lock(*mu_);
  for (auto it = slots_.begin(); it != slots_.end();) {
    if (!it->second.dirty) {
      WillWrite(it->first, it->second.acc);
      accumulator_bytes_ -= static_cast<int64_t>(it->second.acc.size()) * 4;
      it = slots_.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace geops::wan
