#include "python/src/client.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "common/float_kernels.h"
#include "thrift/shard_connection_factory.h"
#include "worker/stream_copy.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace geops::python {
namespace {

std::string Describe(float v) {
  if (std::isnan(v)) return "nan";
  return v > 0 ? "inf" : "-inf";
}

struct Subtracted {
  bool changed = false;  // some delta[i] != 0
  bool finite = true;    // every now[i] is finite
};

// delta[i] = now[i] - pulled[i] for i in [0, n), checking `now` for NaN/Inf
// in the same pass: one read of each input and one write, where a separate
// check and subtraction would read `now` twice (the model is often larger
// than the caches, so push costs what it moves through memory). With
// kStream, for a model larger than the caches, the delta (the op-log, read
// next by the clock's send) is written with streaming stores where the CPU
// has them, so its lines are not read first (see worker/stream_copy.h); the
// caller fences them (worker::StreamFence).
// REQUIRES: the three ranges do not overlap.
template <bool kStream>
Subtracted SubtractInto(const float* __restrict now, const float* __restrict pulled, float* __restrict delta,
                        int64_t n) {
  constexpr uint32_t kExponent = 0x7f800000u;  // all set: NaN or +-Inf
  uint32_t changed = 0, bad = 0;
  int64_t i = 0;
  auto one = [&](int64_t k) {
    const float d = now[k] - pulled[k];
    delta[k] = d;
    changed |= d != 0.0f ? 1u : 0u;
    bad |= std::isfinite(now[k]) ? 0u : 1u;
  };
#if defined(__SSE2__)
  while (i < n && (reinterpret_cast<uintptr_t>(delta + i) & 15) != 0) one(i++);
  const __m128i exponent = _mm_set1_epi32(static_cast<int>(kExponent));
  const __m128 zero = _mm_setzero_ps();
  __m128 any_changed = zero;
  __m128i any_bad = _mm_setzero_si128();
  for (; i + 4 <= n; i += 4) {
    const __m128 v = _mm_loadu_ps(now + i);
    const __m128 d = _mm_sub_ps(v, _mm_loadu_ps(pulled + i));
    if constexpr (kStream) {
      _mm_stream_ps(delta + i, d);
    } else {
      _mm_store_ps(delta + i, d);
    }
    any_changed = _mm_or_ps(any_changed, _mm_cmpneq_ps(d, zero));
    any_bad = _mm_or_si128(any_bad,
                           _mm_cmpeq_epi32(_mm_and_si128(_mm_castps_si128(v), exponent), exponent));
  }
  changed |= _mm_movemask_ps(any_changed) != 0 ? 1u : 0u;
  bad |= _mm_movemask_epi8(any_bad) != 0 ? 1u : 0u;
#else
  // Floats per block: a fixed inner trip count lets GCC's cheap -O2 vectoriser
  // turn each block into a few SIMD instructions (as datacenter/float_kernels.cc).
  constexpr int64_t kBlock = 16;
  for (; i + kBlock <= n; i += kBlock) {
    uint32_t block_changed = 0, block_bad = 0;
    for (int64_t j = 0; j < kBlock; ++j) {
      uint32_t bits;
      std::memcpy(&bits, now + i + j, sizeof(bits));
      const float d = now[i + j] - pulled[i + j];
      delta[i + j] = d;
      block_changed |= d != 0.0f ? 1u : 0u;
      block_bad |= (~bits & kExponent) == 0 ? 1u : 0u;
    }
    changed |= block_changed;
    bad |= block_bad;
  }
#endif
  for (; i < n; ++i) one(i);
  return Subtracted{changed != 0, bad == 0};
}

// A fingerprint of `n` floats for telling whether a tensor changed between
// two calls (not stored, not sent): two Fletcher sums over 64-bit words in
// four interleaved streams, which the compiler turns into SIMD adds, so it
// runs at memory speed: 3.9 ms for 40 MB here, where ValuesChecksum (the
// schema's checksum, a multiply per word) takes 12.5 ms. A change goes
// unseen only by a 64-bit coincidence.
uint64_t ChangeSum(const float* v, int64_t n) {
  constexpr int kStreams = 4;
  uint64_t s1[kStreams] = {0, 0, 0, 0}, s2[kStreams] = {0, 0, 0, 0};
  const int64_t words = n / 2;
  int64_t w = 0;
  for (; w + kStreams <= words; w += kStreams) {
    uint64_t x[kStreams];
    std::memcpy(x, v + 2 * w, sizeof(x));
    for (int j = 0; j < kStreams; ++j) {
      s1[j] += x[j];
      s2[j] += s1[j];
    }
  }
  uint64_t tail = static_cast<uint64_t>(n);
  for (int64_t i = 2 * w; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, v + i, sizeof(bits));
    tail = tail * 0x100000001b3ull + bits;
  }
  uint64_t h = tail;
  for (int j = 0; j < kStreams; ++j) h = (h ^ s1[j]) * 0x9e3779b97f4a7c15ull ^ (s2[j] + static_cast<uint64_t>(j));
  return h;
}

}  // namespace

Result<std::unique_ptr<Client>> Client::Create(ClientConfig config) {
  GEOPS_RETURN_IF_ERROR(config.options.Validate());
  GEOPS_ASSIGN_OR_RETURN(ModelSpec spec, ClientModelSpec(config.tables, config.chunk_bytes,
                                                         config.site_model ? &*config.site_model : nullptr));
  std::unique_ptr<Client> c(new Client());
  c->config_ = std::move(config);
  c->spec_ = std::move(spec);
  return c;
}

Client::~Client() { client_.reset(); }

Status Client::CheckViews(std::span<const TableView> views) const {
  const ModelSpec& s = spec();
  if (views.size() != static_cast<size_t>(s.num_tables())) {
    return InvalidArgumentError("got " + std::to_string(views.size()) + " tensors for a model of " +
                                std::to_string(s.num_tables()) + " tables");
  }
  for (TableId t = 0; t < static_cast<TableId>(views.size()); ++t) {
    const TableSpec& table = s.table(t);
    if (views[t].size != table.rows * table.cols) {
      return InvalidArgumentError("parameter '" + table.name + "' has " + std::to_string(views[t].size) +
                                  " elements; its table is " + std::to_string(table.rows) + "x" +
                                  std::to_string(table.cols));
    }
  }
  return Status::Ok();
}

Status Client::CheckStarted() const {
  if (client_ == nullptr) return FailedPreconditionError("the geops client has not started");
  return Status::Ok();
}

Status Client::Start(std::span<const TableView> initial) {
  if (client_ != nullptr) return FailedPreconditionError("the geops client has started already");
  GEOPS_RETURN_IF_ERROR(CheckViews(initial));
  staged_ = false;
  std::vector<const float*> values;
  if (spec_.client_defined()) {
    // The schema's checksums come from the values the model was built with.
    std::vector<TableSpec> tables = spec_.tables();
    for (size_t t = 0; t < tables.size(); ++t) {
      tables[t].init_checksum = ValuesChecksum(std::span<const float>(initial[t].data, initial[t].size));
      values.push_back(initial[t].data);
    }
    GEOPS_ASSIGN_OR_RETURN(spec_, ModelSpec::Create(std::move(tables), spec_.chunk_bytes(), 0));
  }
  rpc::ThriftClientOptions thrift_options;
  thrift_options.rpc_timeout_ms = config_.options.rpc_timeout_ms;
  thrift_options.tls = config_.tls;
  // With the spec, pulled chunks land straight in the cache and their sizes are checked.
  GEOPS_ASSIGN_OR_RETURN(thrift_, rpc::ThriftShardConnectionFactory::Create(
                                      config_.shards, thrift_options, std::make_shared<const ModelSpec>(spec_)));
  factory_ = std::make_unique<CancellableConnectionFactory>(thrift_.get(), &cancel_);
  GEOPS_ASSIGN_OR_RETURN(std::unique_ptr<worker::PsClient> client,
                         worker::PsClient::Create(spec_, static_cast<int>(config_.shards.size()), config_.options,
                                                  factory_.get()));
  GEOPS_RETURN_IF_ERROR(client->Start(values));
  client_ = std::move(client);
  return Status::Ok();
}

bool Client::IsBuffer(TableId t) const {
  return static_cast<size_t>(t) < config_.buffer_tables.size() && config_.buffer_tables[t] != 0;
}

Status Client::CheckNoLocalChange(std::span<const TableView> views, const std::string& what) const {
  const ModelSpec& s = spec();
  for (TableId t = 0; t < static_cast<TableId>(views.size()); ++t) {
    if (IsBuffer(t)) continue;  // running statistics: a pull replaces them with the workers' average
    const float* now = views[t].data;
    const int64_t n = views[t].size;
    if (baseline_ == Baseline::kCache) {
      const float* pulled = client_->table(t);
      if (std::memcmp(now, pulled, static_cast<size_t>(n) * sizeof(float)) == 0) continue;
      int64_t i = 0;
      while (i < n && std::memcmp(now + i, pulled + i, sizeof(float)) == 0) ++i;
      char values[96];
      std::snprintf(values, sizeof(values), " (element %lld: %.9g now, %.9g as pulled)", static_cast<long long>(i),
                    static_cast<double>(now[i]), static_cast<double>(pulled[i]));
      return FailedPreconditionError(what + ": parameter '" + s.table(t).name + "' changed since the last pull()" +
                                     values);
    }
    if (baseline_ == Baseline::kPushed && ChangeSum(now, n) != pushed_sums_[t]) {
      return FailedPreconditionError(what + ": parameter '" + s.table(t).name +
                                     "' changed since the last push() and clock()");
    }
  }
  return Status::Ok();
}

Status Client::CheckSamePushed(std::span<const TableView> views) const {
  for (TableId t = 0; t < static_cast<TableId>(views.size()); ++t) {
    if (IsBuffer(t)) continue;
    if (ChangeSum(views[t].data, views[t].size) != staged_sums_[t]) {
      return FailedPreconditionError("clock() refused, nothing sent: parameter '" + spec().table(t).name +
                                     "' changed after push() in clock " + std::to_string(clock()) +
                                     ", and that change would be lost; call push() again (it replaces the staged "
                                     "delta), then clock()");
    }
  }
  return Status::Ok();
}

Status Client::Pull(int64_t staleness, std::span<const TableView> views, bool discard) {
  GEOPS_RETURN_IF_ERROR(CheckStarted());
  GEOPS_RETURN_IF_ERROR(CheckViews(views));
  if (staged_) {
    return FailedPreconditionError("pull() after push() in clock " + std::to_string(clock()) +
                                   ": call clock() first (a pull would overwrite the values the pushed "
                                   "delta was taken from)");
  }
  if (!discard) {
    Status unchanged = CheckNoLocalChange(views, "pull() refused, nothing read");
    if (!unchanged.ok()) {
      return FailedPreconditionError(unchanged.message() +
                                     ", and pulling would overwrite that change (a step made after pull() and "
                                     "not pushed, e.g. opt.step() then pull()); call push() and clock() first, "
                                     "or pull(discard=True) to drop the change");
    }
  }
  std::vector<float*> into(views.size());
  for (size_t t = 0; t < views.size(); ++t) into[t] = views[t].data;
  const uint64_t version = client_->cache_version();
  Status read = staleness == kConfiguredStaleness ? client_->Refresh(into)
                                                 : client_->ReadAt(client_->clock(), staleness, into);
  if (!read.ok()) {
    // Some chunks may be in the views already, so neither the cache nor the
    // pushed checksums describe them: the next pull is not checked.
    baseline_ = Baseline::kNone;
    return read;
  }
  // A cache hit read nothing: the values come from the cache.
  if (client_->cache_version() == version) GEOPS_RETURN_IF_ERROR(CopyOut(views));
  baseline_ = Baseline::kCache;
  return Status::Ok();
}

Status Client::Snapshot(int64_t staleness, std::span<const TableView> out) {
  GEOPS_RETURN_IF_ERROR(CheckStarted());
  GEOPS_RETURN_IF_ERROR(CheckViews(out));
  if (staged_) {
    return FailedPreconditionError("save() after push() in clock " + std::to_string(clock()) +
                                   ": call clock() first");
  }
  if (baseline_ == Baseline::kCache) {
    // The read replaces the cache the model's tensors are compared with:
    // keep what it held as checksums.
    pushed_sums_.resize(out.size());
    for (TableId t = 0; t < static_cast<TableId>(out.size()); ++t) {
      pushed_sums_[t] = ChangeSum(client_->table(t), out[t].size);
    }
    baseline_ = Baseline::kPushed;
  }
  std::vector<float*> into(out.size());
  for (size_t t = 0; t < out.size(); ++t) into[t] = out[t].data;
  const uint64_t version = client_->cache_version();
  GEOPS_RETURN_IF_ERROR(client_->ReadAt(client_->clock(), staleness == kConfiguredStaleness ? 0 : staleness, into));
  if (client_->cache_version() == version) GEOPS_RETURN_IF_ERROR(CopyOut(out));
  return Status::Ok();
}

Status Client::CopyOut(std::span<const TableView> views) const {
  GEOPS_RETURN_IF_ERROR(CheckStarted());
  GEOPS_RETURN_IF_ERROR(CheckViews(views));
  for (TableId t = 0; t < static_cast<TableId>(views.size()); ++t) {
    std::memcpy(views[t].data, client_->table(t), views[t].size * sizeof(float));
  }
  return Status::Ok();
}

Status Client::StagePush(std::span<const TableView> views) {
  GEOPS_RETURN_IF_ERROR(CheckStarted());
  GEOPS_RETURN_IF_ERROR(CheckViews(views));
  const ModelSpec& s = spec();
  const TableId num_tables = static_cast<TableId>(views.size());
  auto refuse = [&](TableId t) {
    const int64_t bad = FirstNonFinite(views[t].data, views[t].size);
    const int64_t cols = s.table(t).cols;
    return InvalidArgumentError("push refused, nothing sent: parameter '" + s.table(t).name + "' holds " +
                                Describe(views[t].data[bad]) + " at element " + std::to_string(bad) + " (row " +
                                std::to_string(bad / cols) + ", col " + std::to_string(bad % cols) +
                                "); check the loss and gradients of this step");
  };
  // A refused push leaves the op-log as it was. A repeated push (a delta
  // already staged in this clock) checks everything before overwriting it;
  // otherwise the op-log holds zeros (PsClient clears it at every clock, and
  // only StagePush writes it), so the check runs in the same pass as the
  // subtraction and a refusal puts the zeros back.
  if (staged_) {
    for (TableId t = 0; t < num_tables; ++t) {
      if (!AllFinite(views[t].data, views[t].size)) return refuse(t);
    }
  }
  std::vector<uint8_t> changed(num_tables, 0);
  const bool stream = client_->streams_copies();
  for (TableId t = 0; t < num_tables; ++t) {
    float* delta = client_->delta(t);
    const Subtracted r = stream ? SubtractInto<true>(views[t].data, client_->table(t), delta, views[t].size)
                                : SubtractInto<false>(views[t].data, client_->table(t), delta, views[t].size);
    if (!r.finite) {  // only when nothing was staged (checked above otherwise): put the zeros back
      for (TableId u = 0; u <= t; ++u) std::fill(client_->delta(u), client_->delta(u) + views[u].size, 0.0f);
      return refuse(t);
    }
    if (IsBuffer(t) && config_.buffer_scale != 1.0f) {
      for (int64_t i = 0; i < views[t].size; ++i) delta[i] *= config_.buffer_scale;
    }
    changed[t] = r.changed;
  }
  if (stream) worker::StreamFence();  // the op-log's streaming stores, before the clock reads it
  for (TableId t = 0; t < num_tables; ++t) {
    if (changed[t]) client_->MarkDirty(t);
  }
  staged_sums_.resize(num_tables);
  for (TableId t = 0; t < num_tables; ++t) {
    staged_sums_[t] = ChangeSum(views[t].data, views[t].size);
  }
  staged_ = true;
  return Status::Ok();
}

Status Client::Clock(bool finished, std::span<const TableView> views) {
  GEOPS_RETURN_IF_ERROR(CheckStarted());
  if (!views.empty()) {
    GEOPS_RETURN_IF_ERROR(CheckViews(views));
    if (staged_) {
      GEOPS_RETURN_IF_ERROR(CheckSamePushed(views));
    } else {
      Status unchanged = CheckNoLocalChange(views, "clock() refused, nothing sent");
      if (!unchanged.ok()) {
        return FailedPreconditionError(unchanged.message() +
                                       " and was never pushed, so this step's change would be lost; call push() "
                                       "before clock()");
      }
    }
  }
  GEOPS_RETURN_IF_ERROR(client_->Clock(finished));
  if (staged_) {
    pushed_sums_ = staged_sums_;
    baseline_ = Baseline::kPushed;
  }
  staged_ = false;
  return Status::Ok();
}

}  // namespace geops::python
