#include "datacenter/chunk_store.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <mutex>
#include <new>

#include "common/float_kernels.h"

namespace geops::datacenter {
namespace {

// Chunks start on 64-byte boundaries: aligned SIMD access, and two chunks
// written by different threads never share a cache line.
constexpr int64_t kAlignFloats = 16;
constexpr std::align_val_t kAlignment{64};

}  // namespace

Result<std::unique_ptr<ChunkStore>> ChunkStore::Create(const ModelSpec* spec, ShardId shard,
                                                       int num_shards) {
  std::unique_ptr<ChunkStore> store(new ChunkStore());
  store->table_first_.reserve(spec->num_tables());
  int64_t model_chunks = 0;
  for (TableId t = 0; t < static_cast<TableId>(spec->num_tables()); ++t) {
    store->table_first_.push_back(model_chunks);
    model_chunks += spec->num_chunks(t);
  }
  store->local_of_.assign(model_chunks, -1);
  store->keys_ = spec->ChunksOfShard(shard, num_shards);
  const int64_t n = static_cast<int64_t>(store->keys_.size());
  if (n > INT32_MAX) return ResourceExhaustedError("shard owns too many chunks: " + std::to_string(n));
  store->offsets_.reserve(n + 1);
  store->pad_.reserve(n);
  int64_t offset = 0;
  for (int64_t i = 0; i < n; ++i) {
    const ChunkKey key = store->keys_[i];
    store->local_of_[store->table_first_[key.table] + key.chunk] = static_cast<int32_t>(i);
    const int64_t elements = spec->ChunkElements(key);
    const int64_t padded = (elements + kAlignFloats - 1) / kAlignFloats * kAlignFloats;
    store->offsets_.push_back(offset);
    store->pad_.push_back(static_cast<int32_t>(padded - elements));
    store->num_elements_ += elements;
    offset += padded;
  }
  store->offsets_.push_back(offset);

  const size_t bytes = static_cast<size_t>(std::max<int64_t>(offset, 1)) * sizeof(float);
  store->data_ = static_cast<float*>(::operator new[](bytes, kAlignment, std::nothrow));
  if (store->data_ == nullptr) {
    return ResourceExhaustedError("cannot allocate " + std::to_string(bytes) +
                                  " bytes for the chunks of shard " + std::to_string(shard));
  }
  store->locks_.reset(new (std::nothrow) std::shared_mutex[std::max<int64_t>(n, 1)]);
  store->bound_.reset(new (std::nothrow) float[std::max<int64_t>(n, 1)]);
  if (!store->locks_ || !store->bound_) return ResourceExhaustedError("cannot allocate chunk locks and bounds");
  for (int64_t i = 0; i < n; ++i) {
    float* dst = store->data_ + store->offsets_[i];
    spec->InitChunk(store->keys_[i], dst);
    std::fill(dst + store->elements(i), store->data_ + store->offsets_[i + 1], 0.0f);
    store->bound_[i] = MaxAbs(dst, store->elements(i));
  }
  return store;
}

ChunkStore::~ChunkStore() {
  if (data_ != nullptr) ::operator delete[](data_, kAlignment);
}

void ChunkStore::Read(int64_t local, float* out) const {
  const float* src = data_ + offsets_[local];
  const int64_t n = elements(local);
  std::shared_lock<std::shared_mutex> lock(locks_[local]);
  std::copy(src, src + n, out);
}

ChunkStore::BatchGuard::BatchGuard(ChunkStore* store, std::span<const int64_t> locals, int writer)
    : store_(store), locals_(locals), writer_(writer), order_(locals.begin(), locals.end()) {
  std::sort(order_.begin(), order_.end());
  for (int64_t local : order_) store_->locks_[local].lock();
}

ChunkStore::BatchGuard::~BatchGuard() {
  for (auto it = order_.rbegin(); it != order_.rend(); ++it) store_->locks_[*it].unlock();
}

std::optional<ChunkStore::BatchGuard::NonFinite> ChunkStore::BatchGuard::CheckSum(const float* deltas) const {
  // |a| <= FLT_MAX / 2 and |b| <= FLT_MAX / 2 make |a + b| <= FLT_MAX, and
  // rounding a magnitude at most FLT_MAX to float gives at most FLT_MAX.
  constexpr float kHalfMax = std::numeric_limits<float>::max() / 2;
  const float* src = deltas;
  for (size_t c = 0; c < locals_.size(); ++c) {
    const int64_t local = locals_[c];
    const int64_t n = store_->elements(local);
    const float* dst = store_->data_ + store_->offsets_[local];
    if (store_->bound_[local] <= kHalfMax && MaxAbs(src, n) <= kHalfMax) {
      src += n;
      continue;
    }
    if (!SumAllFinite(dst, src, n)) {
      const int64_t e = FirstNonFiniteSum(dst, src, n);
      return NonFinite{c, e, dst[e], src[e]};
    }
    src += n;
  }
  return std::nullopt;
}

void ChunkStore::BatchGuard::Add(const float* deltas) {
  const float* src = deltas;
  for (int64_t local : locals_) {
    const int64_t n = store_->elements(local);
    store_->WillWrite(local);
    store_->MarkWhole(local, writer_);
    store_->bound_[local] = AddIntoMaxAbs(store_->data_ + store_->offsets_[local], src, n);
    src += n;
  }
}

std::optional<ChunkStore::BatchGuard::NonFinite> ChunkStore::BatchGuard::CheckSparseSum(
    size_t chunk, std::span<const uint32_t> indices, std::span<const float> values) const {
  const float* dst = store_->data_ + store_->offsets_[locals_[chunk]];
  // One branch-free pass (a sum is not finite when its exponent bits are
  // all set); the element is looked for only when one is.
  uint32_t all_ones = 0;
  for (size_t i = 0; i < indices.size(); ++i) {
    const uint32_t bits = std::bit_cast<uint32_t>(dst[indices[i]] + values[i]);
    all_ones |= static_cast<uint32_t>((bits & 0x7f800000u) == 0x7f800000u);
  }
  if (all_ones == 0) return std::nullopt;
  for (size_t i = 0; i < indices.size(); ++i) {
    if (!std::isfinite(dst[indices[i]] + values[i])) {
      return NonFinite{chunk, static_cast<int64_t>(indices[i]), dst[indices[i]], values[i]};
    }
  }
  return std::nullopt;
}

void ChunkStore::BatchGuard::AddSparse(size_t chunk, std::span<const uint32_t> indices,
                                       std::span<const float> values) {
  const int64_t local = locals_[chunk];
  float* dst = store_->data_ + store_->offsets_[local];
  store_->WillWrite(local);
  store_->MarkElements(local, indices);
  // The values not touched keep the old bound; the touched ones are known.
  float bound = store_->bound_[local];
  for (size_t i = 0; i < indices.size(); ++i) {
    dst[indices[i]] += values[i];
    bound = std::max(bound, std::fabs(dst[indices[i]]));
  }
  store_->bound_[local] = bound;
}

void ChunkStore::Add(int64_t local, const float* delta) {
  float* dst = data_ + offsets_[local];
  const int64_t n = elements(local);
  std::unique_lock<std::shared_mutex> lock(locks_[local]);
  WillWrite(local);
  MarkWhole(local, -1);
  bound_[local] = AddIntoMaxAbs(dst, delta, n);
}

void ChunkStore::Overwrite(int64_t local, const float* values) {
  float* dst = data_ + offsets_[local];
  const int64_t n = elements(local);
  std::unique_lock<std::shared_mutex> lock(locks_[local]);
  WillWrite(local);
  MarkWhole(local, -1);
  std::copy(values, values + n, dst);
  bound_[local] = MaxAbs(dst, n);
}

void ChunkStore::EnableChangeTracking(int readers) {
  readers_ = readers;
  const size_t n = keys_.size();
  whole_.assign(static_cast<size_t>(readers) * n, 1);  // nothing read yet: everything to send
  words_.assign(n + 1, 0);
  for (size_t i = 0; i < n; ++i) words_[i + 1] = words_[i] + (elements(static_cast<int64_t>(i)) + 63) / 64;
  bits_.assign(static_cast<size_t>(readers) * static_cast<size_t>(words_.back()), 0);
}

void ChunkStore::MarkElements(int64_t local, std::span<const uint32_t> indices) {
  for (int r = 0; r < readers_; ++r) {
    if (Whole(r, local)) continue;  // goes whole anyway
    uint64_t* bits = Bits(r, local);
    for (uint32_t e : indices) bits[e / 64] |= uint64_t{1} << (e % 64);
  }
}

void ChunkStore::MarkAllChanged(int slot) {
  for (int64_t i = 0; i < num_chunks(); ++i) {
    std::shared_lock<std::shared_mutex> lock(locks_[i]);
    Whole(slot, i) = 1;
  }
}

void ChunkStore::ReadChanged(int64_t local, int slot, uint32_t base, std::vector<uint32_t>* runs,
                             std::vector<float>* values) {
  const float* src = data_ + offsets_[local];
  const int64_t n = elements(local);
  uint64_t* bits = Bits(slot, local);
  const int64_t words = words_[local + 1] - words_[local];
  // Elements [begin, end) as one run.
  const auto emit = [&](int64_t begin, int64_t end) {
    runs->push_back(base + static_cast<uint32_t>(begin));
    runs->push_back(static_cast<uint32_t>(end - begin));
    values->insert(values->end(), src + begin, src + end);
  };
  std::shared_lock<std::shared_mutex> lock(locks_[local]);
  uint8_t& whole = Whole(slot, local);
  if (!whole) {
    // A run costs 8 bytes besides its values: past a third of the chunk
    // marked, the whole chunk is as cheap to send, and quicker to make.
    int64_t marked = 0;
    for (int64_t w = 0; w < words; ++w) marked += std::popcount(bits[w]);
    if (marked * 3 > n) whole = 1;
  }
  if (whole) {
    emit(0, n);
    whole = 0;
    std::fill(bits, bits + words, uint64_t{0});
    return;
  }
  // Runs of consecutive marked elements (no bit is set at or past n).
  int64_t run_start = -1;
  for (int64_t w = 0; w < words; ++w) {
    const uint64_t word = bits[w];
    if (word == 0 && run_start < 0) continue;
    bits[w] = 0;
    if (word == ~uint64_t{0} && run_start >= 0) continue;  // the run goes on through this word
    for (int b = 0; b < 64; ++b) {
      const bool marked = (word >> b) & 1;
      if (marked == (run_start >= 0)) continue;
      if (marked) {
        run_start = w * 64 + b;
      } else {
        emit(run_start, w * 64 + b);
        run_start = -1;
      }
    }
  }
  if (run_start >= 0) emit(run_start, n);
}

void ChunkStore::Snapshot(std::vector<std::pair<ChunkKey, std::vector<float>>>* out) const {
  out->clear();
  out->reserve(keys_.size());
  for (int64_t i = 0; i < num_chunks(); ++i) {
    std::vector<float> values(elements(i));
    Read(i, values.data());
    out->emplace_back(keys_[i], std::move(values));
  }
}

}  // namespace geops::datacenter
