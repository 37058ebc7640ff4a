// The GPU trainer path through a real PsClient and in-process shards: it
// trains like the CPU path, uploads only after reads from the shards, and
// folds its own updates otherwise. Skips without a device.
#include "worker/cuda/cuda_trainer_path.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "datacenter/shard.h"
#include "tests/worker/gpu_test_util.h"
#include "tests/worker/local_connection.h"
#include "worker/cpu_backend.h"
#include "worker/cuda/cuda_backend.h"

namespace geops::worker::cuda {
namespace {

using gpu_test::Tables;

// One site: `shards` shards of `spec`, one worker with staleness `s`.
class OneWorkerSite {
 public:
  OneWorkerSite(const ModelSpec& spec, int shards, int64_t s) {
    for (int i = 0; i < shards; ++i) {
      ShardOptions o;
      o.shard_id = i;
      o.num_shards = shards;
      o.num_workers = 1;
      auto shard = datacenter::Shard::Create(spec, o);
      EXPECT_TRUE(shard.ok()) << shard.status().ToString();
      raw_.push_back(shard->get());
      shards_.push_back(std::move(shard).value());
    }
    factory_ = std::make_unique<LocalConnectionFactory>(raw_);
    WorkerClientOptions o;
    o.staleness = s;
    o.rpc_timeout_ms = 10000;
    o.heartbeat_ms = 50;
    auto c = PsClient::Create(spec, shards, o, factory_.get());
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    client_ = std::move(c).value();
    EXPECT_TRUE(client_->Start().ok());
  }
  PsClient* client() { return client_.get(); }

  Tables Snapshot() const {
    Tables out;
    for (TableId t = 0; t < static_cast<TableId>(client_->spec().num_tables()); ++t) {
      const TableSpec& ts = client_->spec().table(t);
      out.emplace_back(client_->table(t), client_->table(t) + ts.rows * ts.cols);
    }
    return out;
  }

 private:
  std::vector<std::unique_ptr<datacenter::Shard>> shards_;
  std::vector<datacenter::Shard*> raw_;
  std::unique_ptr<LocalConnectionFactory> factory_;
  std::unique_ptr<PsClient> client_;
};

TEST(CudaTrainerPathTest, TrainsLikeTheCpuPathAndUploadsOnlyAfterReads) {
  GEOPS_SKIP_WITHOUT_CUDA_DEVICE();
  const MlpShape shape{{16, 32, 24, 4}};
  auto spec = MlpModelSpec(shape, 512, 7);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  const Dataset data = gpu_test::RandomData(shape, 256, 4);
  const int clocks = 18;
  const float lr = 0.05f;
  for (int64_t s : {0, 2}) {
    SCOPED_TRACE("staleness " + std::to_string(s));
    OneWorkerSite gpu_site(*spec, 2, s), cpu_site(*spec, 2, s);
    auto cuda = CudaBackend::Create(shape);
    ASSERT_TRUE(cuda.ok()) << cuda.status().ToString();
    auto cpu = NewCpuBackend(shape, 1);
    ASSERT_TRUE(cpu.ok());
    auto path = CudaTrainerPath::ForBackend(cuda->get(), gpu_site.client());
    ASSERT_TRUE(path.ok()) << path.status().ToString();
    ASSERT_NE(*path, nullptr);
    auto gpu_sampler = BatchSampler::Create(&data, 32, 9, 0);
    auto cpu_sampler = BatchSampler::Create(&data, 32, 9, 0);
    ASSERT_TRUE(gpu_sampler.ok() && cpu_sampler.ok());
    int64_t reads = 0;
    for (int c = 0; c < clocks; ++c) {
      const int64_t refreshes = gpu_site.client()->stats().refreshes;
      ASSERT_TRUE(gpu_site.client()->Refresh().ok());
      ASSERT_TRUE(cpu_site.client()->Refresh().ok());
      reads += gpu_site.client()->stats().refreshes - refreshes;
      auto g = (*path)->TrainStep(gpu_sampler->Next(), lr);
      ASSERT_TRUE(g.ok()) << g.status().ToString();
      PsClient* cc = cpu_site.client();
      auto want = (*cpu)->TrainStep(cc->tables(), cpu_sampler->Next(), lr, cc->deltas());
      ASSERT_TRUE(want.ok());
      cc->MarkAllDirty();
      EXPECT_NEAR(g->loss, want->loss, 1e-4 * want->loss) << "clock " << c;
      ASSERT_TRUE(gpu_site.client()->Clock(c + 1 == clocks).ok());
      ASSERT_TRUE(cc->Clock(c + 1 == clocks).ok());
    }
    gpu_test::ExpectTablesNear(gpu_site.Snapshot(), cpu_site.Snapshot(), 1e-3, "final model");

    // The device copy equals the client's cache: evaluating through the path
    // (which folds the last clock's updates first) gives the CPU's answer.
    auto eval = (*path)->Evaluate(data.AsBatch());
    auto want = (*cpu)->Evaluate(gpu_site.client()->tables(), data.AsBatch());
    ASSERT_TRUE(eval.ok()) << eval.status().ToString();
    ASSERT_TRUE(want.ok());
    EXPECT_NEAR(eval->loss, want->loss, 1e-5 * want->loss);

    const GpuParamCacheStats st = (*path)->cache_stats();
    const int64_t tables = spec->num_tables();
    EXPECT_EQ(st.table_uploads, tables * reads);
    // A fold at every clock without a read, and one before the final Evaluate.
    EXPECT_EQ(st.folds, tables * (clocks - reads + 1));
    if (s == 0) {
      EXPECT_EQ(reads, clocks);
    } else {
      EXPECT_LT(reads, clocks);
    }
    EXPECT_EQ(st.bytes_downloaded, clocks * spec->total_elements() * 4);
  }
}

TEST(CudaTrainerPathTest, IsNullForOtherBackendsAndRefusesAnotherModel) {
  GEOPS_SKIP_WITHOUT_CUDA_DEVICE();
  const MlpShape shape{{16, 32, 4}};
  auto spec = MlpModelSpec(shape, 512, 7);
  ASSERT_TRUE(spec.ok());
  OneWorkerSite site(*spec, 1, 0);
  auto cpu = NewCpuBackend(shape, 1);
  ASSERT_TRUE(cpu.ok());
  auto none = CudaTrainerPath::ForBackend(cpu->get(), site.client());
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, nullptr);
  auto other = CudaBackend::Create(MlpShape{{16, 8, 4}});
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(CudaTrainerPath::ForBackend(other->get(), site.client()).status().code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace geops::worker::cuda
