// The GPU parameter cache: it serves exactly the host version of each step
// (so never staler than the host cache's SSP bound), folds its own updates
// bit-exactly instead of uploading, streams tables under a memory budget, and
// reports memory exhaustion. Skips without a device.
#include "worker/cuda/gpu_param_cache.h"

#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <vector>

#include "tests/worker/gpu_test_util.h"
#include "worker/cpu_backend.h"
#include "worker/cuda/cuda_backend.h"

namespace geops::worker::cuda {
namespace {

using gpu_test::Filled;
using gpu_test::MutPtrs;
using gpu_test::Ptrs;
using gpu_test::Tables;

// A stand-in for the PsClient's host cache under SSP with bound `s`: a
// version that moves at every change, and the clock its values were read at.
// At clock c it reads fresh values (new contents) unless its stamp is >= c - s;
// Clock() adds the worker's own updates.
class FakeHostCache {
 public:
  FakeHostCache(const MlpShape& shape, int64_t s, uint32_t seed)
      : shape_(shape), s_(s), rng_(seed), tables_(gpu_test::RandomTables(shape, seed)) {}

  // Returns true when it read from the "shards".
  bool Refresh() {
    if (stamp_ >= 0 && stamp_ >= clock_ - s_) return false;
    tables_ = gpu_test::RandomTables(shape_, static_cast<uint32_t>(rng_()));
    stamp_ = clock_;
    ++version_;
    return true;
  }
  void Clock(const Tables& deltas) {
    for (size_t t = 0; t < tables_.size(); ++t) {
      for (size_t k = 0; k < tables_[t].size(); ++k) tables_[t][k] += deltas[t][k];
    }
    ++clock_;
    ++version_;
  }
  const Tables& tables() const { return tables_; }
  uint64_t version() const { return version_; }
  int64_t clock() const { return clock_; }
  int64_t stamp() const { return stamp_; }

 private:
  MlpShape shape_;
  int64_t s_;
  std::mt19937 rng_;
  Tables tables_;
  uint64_t version_ = 0;
  int64_t clock_ = 0;
  int64_t stamp_ = -1;
};

struct Rig {
  explicit Rig(const MlpShape& shape, const GpuParamCacheOptions& options = {}) {
    auto b = CudaBackend::Create(shape);
    EXPECT_TRUE(b.ok()) << b.status().ToString();
    if (!b.ok()) return;
    backend = std::move(b).value();
    auto c = GpuParamCache::Create(MlpTables(shape), backend->device(), options);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    if (c.ok()) cache = std::move(c).value();
  }
  // One step through the cache; the updates into `deltas`.
  Status Step(const Tables& host, uint64_t version, const Batch& batch, Tables* deltas) {
    GEOPS_RETURN_IF_ERROR(cache->BeginStep(Ptrs(host), version));
    GEOPS_RETURN_IF_ERROR(backend->EnqueueTrainStep(cache.get(), batch, 0.05f));
    const Status collected = cache->CollectDeltas(MutPtrs(*deltas));
    auto stats = backend->FinishTrainStep();
    GEOPS_RETURN_IF_ERROR(collected);
    return stats.status();
  }
  std::unique_ptr<CudaBackend> backend;
  std::unique_ptr<GpuParamCache> cache;
};

// Every table the cache holds is the host's at `version`, bit for bit.
void ExpectHolds(GpuParamCache* cache, const Tables& host, uint64_t version) {
  for (int t = 0; t < cache->num_tables(); ++t) {
    std::vector<float> got(host[t].size(), -1.0f);
    auto held = cache->ReadBack(t, got.data());
    ASSERT_TRUE(held.ok()) << held.status().ToString();
    ASSERT_TRUE(held->has_value()) << "table " << t;
    EXPECT_EQ(**held, version) << "table " << t;
    EXPECT_EQ(got, host[t]) << "table " << t << " differs from the host";
  }
}

// Drives `steps` SSP clocks with bound `s` through the cache and checks, at
// every step, that the device served exactly the host's current version
// (hence values read at a clock >= c - s) and that the updates are the CPU
// backend's on the host's values.
void RunSspSchedule(const MlpShape& shape, int64_t s, int steps, const GpuParamCacheOptions& o) {
  SCOPED_TRACE("staleness " + std::to_string(s));
  Rig rig(shape, o);
  ASSERT_TRUE(rig.cache);
  auto cpu = NewCpuBackend(shape, 1);
  ASSERT_TRUE(cpu.ok());
  FakeHostCache host(shape, s, 17);
  const Dataset data = gpu_test::RandomData(shape, 24, 3);
  Tables deltas = Filled(host.tables(), 0.0f), want = Filled(host.tables(), 0.0f);
  int reads = 0, folds = 0;
  bool can_fold = false;
  for (int c = 0; c < steps; ++c) {
    const uint64_t before = host.version();
    const bool read = host.Refresh();
    reads += read;
    if (!read && can_fold) {
      ASSERT_EQ(host.version(), before);
      ASSERT_TRUE(rig.cache->FoldLastDeltas(host.version()).ok());
      ++folds;
    }
    ASSERT_LE(host.clock() - host.stamp(), s);  // the fake honours the bound
    ASSERT_TRUE(rig.Step(host.tables(), host.version(), data.AsBatch(), &deltas).ok());
    ExpectHolds(rig.cache.get(), host.tables(), host.version());
    ASSERT_TRUE((*cpu)->TrainStep(Ptrs(host.tables()), data.AsBatch(), 0.05f, MutPtrs(want)).ok());
    gpu_test::ExpectTablesNear(deltas, want, 1e-4, "clock " + std::to_string(c));
    host.Clock(deltas);
    can_fold = true;
  }
  EXPECT_GT(reads, 0);
  const GpuParamCacheStats& st = rig.cache->stats();
  int resident = 0;
  for (int t = 0; t < rig.cache->num_tables(); ++t) resident += rig.cache->resident(t);
  // Resident tables upload once per read from the shards and never otherwise.
  EXPECT_EQ(st.table_uploads, int64_t{resident} * reads);
  EXPECT_EQ(st.folds, int64_t{resident} * folds);
  if (s > 0) {
    EXPECT_GT(folds, 0);
  }
}

TEST(GpuParamCacheTest, ServesExactlyTheHostVersionUnderEveryStalenessBound) {
  GEOPS_SKIP_WITHOUT_CUDA_DEVICE();
  const MlpShape shape{{12, 20, 16, 5}};
  for (int64_t s : {0, 1, 3}) RunSspSchedule(shape, s, 12, {});
}

TEST(GpuParamCacheTest, StreamsTablesThatDoNotFitTheBudget) {
  GEOPS_SKIP_WITHOUT_CUDA_DEVICE();
  // Three 256x256 weights dominate; half the resident size cannot keep them.
  const MlpShape shape{{64, 256, 256, 256, 256, 10}};
  int64_t all_resident = 0;
  for (const TableSpec& t : MlpTables(shape)) all_resident += 2 * t.rows * t.cols * 4;
  GpuParamCacheOptions o;
  o.memory_budget_bytes = all_resident / 2;
  o.stream_slots = 2;  // the fewest the backend's access pattern needs
  {
    Rig rig(shape, o);
    ASSERT_TRUE(rig.cache);
    EXPECT_LE(rig.cache->device_bytes(), o.memory_budget_bytes);
    int streamed = 0;
    for (int t = 0; t < rig.cache->num_tables(); ++t) streamed += !rig.cache->resident(t);
    EXPECT_GE(streamed, 2);
    EXPECT_TRUE(rig.cache->resident(1));  // a bias: small tables stay
  }
  RunSspSchedule(shape, 2, 8, o);
  o.stream_slots = 3;
  o.memory_budget_bytes = all_resident * 3 / 4;
  RunSspSchedule(shape, 0, 4, o);
}

TEST(GpuParamCacheTest, UploadsNothingWhenTheVersionDoesNotMove) {
  GEOPS_SKIP_WITHOUT_CUDA_DEVICE();
  const MlpShape shape{{6, 10, 4}};
  Rig rig(shape);
  ASSERT_TRUE(rig.cache);
  const Tables host = gpu_test::RandomTables(shape, 5);
  const Dataset data = gpu_test::RandomData(shape, 8, 6);
  Tables d1 = Filled(host, 0.0f), d2 = Filled(host, 0.0f);
  ASSERT_TRUE(rig.Step(host, 42, data.AsBatch(), &d1).ok());
  const int64_t uploaded = rig.cache->stats().bytes_uploaded;
  EXPECT_GT(uploaded, 0);
  ASSERT_TRUE(rig.Step(host, 42, data.AsBatch(), &d2).ok());
  EXPECT_EQ(rig.cache->stats().bytes_uploaded, uploaded);
  EXPECT_EQ(d1, d2);
}

TEST(GpuParamCacheTest, FoldNeedsACollectedStep) {
  GEOPS_SKIP_WITHOUT_CUDA_DEVICE();
  const MlpShape shape{{6, 10, 4}};
  Rig rig(shape);
  ASSERT_TRUE(rig.cache);
  EXPECT_EQ(rig.cache->FoldLastDeltas(1).code(), StatusCode::kFailedPrecondition);
  const Tables host = gpu_test::RandomTables(shape, 5);
  ASSERT_TRUE(rig.cache->BeginStep(Ptrs(host), 1).ok());
  Tables d = Filled(host, 0.0f);
  EXPECT_EQ(rig.cache->CollectDeltas(MutPtrs(d)).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(rig.cache->FoldLastDeltas(2).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(rig.cache->Release(0, rig.backend->compute_stream()).code(),
            StatusCode::kFailedPrecondition);
}

// The budget is planned before any device call: this one runs without a GPU.
TEST(GpuParamCacheTest, BudgetTooSmallForTheSlotsIsResourceExhausted) {
  GpuParamCacheOptions o;
  o.memory_budget_bytes = 1000;
  auto c = GpuParamCache::Create(MlpTables(MlpShape{}), 0, o);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(c.status().message().find("budget of 1000 bytes"), std::string::npos)
      << c.status().ToString();
  EXPECT_NE(c.status().message().find("fc1.weight"), std::string::npos);
  o.stream_slots = 1;
  EXPECT_EQ(GpuParamCache::Create(MlpTables(MlpShape{}), 0, o).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(GpuParamCacheTest, TableLargerThanTheDeviceIsResourceExhausted) {
  GEOPS_SKIP_WITHOUT_CUDA_DEVICE();
  // 2^37 floats: 512 GiB, more than any GPU holds.
  std::vector<TableSpec> tables = {{"huge", int64_t{1} << 20, int64_t{1} << 17}};
  auto c = GpuParamCache::Create(tables, 0);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kResourceExhausted) << c.status().ToString();
  EXPECT_NE(c.status().message().find("549755813888 bytes"), std::string::npos)
      << c.status().ToString();
  // The device is still fine afterwards.
  Rig rig(MlpShape{{6, 10, 4}});
  EXPECT_TRUE(rig.cache != nullptr);
}

}  // namespace
}  // namespace geops::worker::cuda
