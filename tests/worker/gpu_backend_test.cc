// The CUDA backend against the CPU backend: same updates, same losses, same
// errors, and out-of-memory as an error rather than a crash. Every test that
// needs a GPU skips without one.
#include "worker/cuda/cuda_backend.h"

#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <memory>
#include <span>
#include <vector>

#include "tests/worker/gpu_test_util.h"
#include "worker/cpu_backend.h"
#include "worker/cuda/gpu_param_cache.h"

namespace geops::worker::cuda {
namespace {

using gpu_test::Filled;
using gpu_test::MutPtrs;
using gpu_test::Ptrs;
using gpu_test::Tables;

std::unique_ptr<CudaBackend> MakeCuda(const MlpShape& shape) {
  auto b = CudaBackend::Create(shape);
  EXPECT_TRUE(b.ok()) << b.status().ToString();
  return b.ok() ? std::move(b).value() : nullptr;
}

std::unique_ptr<ComputeBackend> MakeCpu(const MlpShape& shape) {
  auto b = NewCpuBackend(shape, 1);
  EXPECT_TRUE(b.ok()) << b.status().ToString();
  return b.ok() ? std::move(b).value() : nullptr;
}

// One step of both backends on the same tables and batch; the updates agree
// to 1e-4 of the largest update of each table, the losses to 1e-5.
void ExpectOneStepAgrees(const MlpShape& shape, int n, uint32_t seed) {
  SCOPED_TRACE("MLP " + shape.ToString() + ", batch " + std::to_string(n));
  const Tables params = gpu_test::RandomTables(shape, seed);
  const Dataset data = gpu_test::RandomData(shape, n, seed + 1);
  auto cuda = MakeCuda(shape);
  auto cpu = MakeCpu(shape);
  ASSERT_TRUE(cuda && cpu);
  Tables d_gpu = Filled(params, 0.0f), d_cpu = Filled(params, 0.0f);
  auto g = cuda->TrainStep(Ptrs(params), data.AsBatch(), 0.05f, MutPtrs(d_gpu));
  auto c = cpu->TrainStep(Ptrs(params), data.AsBatch(), 0.05f, MutPtrs(d_cpu));
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_NEAR(g->loss, c->loss, 1e-5 * c->loss);
  EXPECT_NEAR(g->correct, c->correct, 1);  // only a near-tie of two logits may flip
  EXPECT_EQ(g->n, n);
  gpu_test::ExpectTablesNear(d_gpu, d_cpu, 1e-4, "updates");
}

TEST(CudaBackendTest, WithoutADeviceCreationFailsCleanly) {
  if (CudaDeviceAvailable()) GTEST_SKIP() << "a CUDA device is present";
  auto b = CudaBackend::Create(MlpShape{});
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(b.status().message().rfind("no CUDA device", 0), 0u) << b.status().ToString();
  auto bad = CudaBackend::Create(MlpShape{{784}});
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
}

TEST(CudaBackendTest, CreateRejectsBadShapesAndDevices) {
  GEOPS_SKIP_WITHOUT_CUDA_DEVICE();
  EXPECT_EQ(CudaBackend::Create(MlpShape{{784}}).status().code(), StatusCode::kInvalidArgument);
  CudaBackendOptions o;
  o.device = 1 << 20;
  EXPECT_EQ(CudaBackend::Create(MlpShape{}, o).status().code(), StatusCode::kInvalidArgument);
  auto b = NewCudaBackend(MlpShape{});
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ((*b)->name().rfind("cuda(", 0), 0u) << (*b)->name();
}

TEST(CudaBackendTest, OneStepMatchesTheCpuBackendOnTinyShapes) {
  GEOPS_SKIP_WITHOUT_CUDA_DEVICE();
  ExpectOneStepAgrees(MlpShape{{4, 5, 3}}, 3, 1);
  ExpectOneStepAgrees(MlpShape{{5, 7, 3}}, 1, 2);
  ExpectOneStepAgrees(MlpShape{{9, 2}}, 13, 3);            // a single layer
  ExpectOneStepAgrees(MlpShape{{33, 65, 17, 40}}, 37, 4);  // widths off every tile size
}

TEST(CudaBackendTest, OneStepMatchesTheCpuBackendOnTheDefaultShape) {
  GEOPS_SKIP_WITHOUT_CUDA_DEVICE();
  ExpectOneStepAgrees(MlpShape{}, 64, 5);
  ExpectOneStepAgrees(MlpShape{}, 1024, 6);
}

TEST(CudaBackendTest, DeviceTablePathMatchesTheHostTablePath) {
  GEOPS_SKIP_WITHOUT_CUDA_DEVICE();
  const MlpShape shape{{20, 48, 32, 6}};
  const Tables params = gpu_test::RandomTables(shape, 7);
  const Dataset data = gpu_test::RandomData(shape, 50, 8);
  auto cuda = MakeCuda(shape);
  ASSERT_TRUE(cuda);
  Tables host_path = Filled(params, 0.0f), device_path = Filled(params, 0.0f);
  auto h = cuda->TrainStep(Ptrs(params), data.AsBatch(), 0.1f, MutPtrs(host_path));
  ASSERT_TRUE(h.ok()) << h.status().ToString();

  auto cache = GpuParamCache::Create(MlpTables(shape), cuda->device());
  ASSERT_TRUE(cache.ok()) << cache.status().ToString();
  ASSERT_TRUE((*cache)->BeginStep(Ptrs(params), 1).ok());
  ASSERT_TRUE(cuda->EnqueueTrainStep(cache->get(), data.AsBatch(), 0.1f).ok());
  EXPECT_EQ(cuda->EnqueueTrainStep(cache->get(), data.AsBatch(), 0.1f).code(),
            StatusCode::kFailedPrecondition);  // one step at a time
  ASSERT_TRUE((*cache)->CollectDeltas(MutPtrs(device_path)).ok());
  auto d = cuda->FinishTrainStep();
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(cuda->FinishTrainStep().status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NEAR(d->loss, h->loss, 1e-6 * h->loss);
  EXPECT_EQ(d->correct, h->correct);
  gpu_test::ExpectTablesNear(device_path, host_path, 1e-6, "device vs host path");

  auto e = cuda->EvaluateTables(cache->get(), data.AsBatch());
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_NEAR(e->loss, h->loss, 1e-6 * h->loss);
}

TEST(CudaBackendTest, EvaluateOverManySlicesMatchesTheCpuBackend) {
  GEOPS_SKIP_WITHOUT_CUDA_DEVICE();
  const MlpShape shape{{8, 16, 3}};
  const Tables params = gpu_test::RandomTables(shape, 9);
  const Dataset data = gpu_test::Blobs(2 * kCudaEvalSliceRows + 37, 4);
  auto cuda = MakeCuda(shape);
  auto cpu = MakeCpu(shape);
  ASSERT_TRUE(cuda && cpu);
  auto g = cuda->Evaluate(Ptrs(params), data.AsBatch());
  auto c = cpu->Evaluate(Ptrs(params), data.AsBatch());
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  ASSERT_TRUE(c.ok());
  EXPECT_NEAR(g->loss, c->loss, 1e-5 * c->loss);
  EXPECT_NEAR(g->correct, c->correct, 2);
  EXPECT_EQ(g->n, data.n);
  EXPECT_DOUBLE_EQ(g->accuracy, static_cast<double>(g->correct) / data.n);
}

TEST(CudaBackendTest, TrainingConvergesLikeTheCpuBackend) {
  GEOPS_SKIP_WITHOUT_CUDA_DEVICE();
  const MlpShape shape{{8, 16, 3}};
  auto spec = MlpModelSpec(shape, 1024, 3);
  ASSERT_TRUE(spec.ok());
  const Dataset data = gpu_test::Blobs(600, 11);
  auto run = [&](ComputeBackend* backend, double* final_loss, double* accuracy) {
    Tables params = InitialTables(*spec);
    Tables deltas = Filled(params, 0.0f);
    auto sampler = BatchSampler::Create(&data, 32, 5, 0);
    ASSERT_TRUE(sampler.ok());
    for (int step = 0; step < 10 * sampler->batches_per_epoch(); ++step) {
      auto stats = backend->TrainStep(Ptrs(params), sampler->Next(), 0.1f, MutPtrs(deltas));
      ASSERT_TRUE(stats.ok()) << stats.status().ToString();
      for (size_t t = 0; t < params.size(); ++t) {
        for (size_t k = 0; k < params[t].size(); ++k) params[t][k] += deltas[t][k];
      }
    }
    auto eval = backend->Evaluate(Ptrs(params), data.AsBatch());
    ASSERT_TRUE(eval.ok());
    *final_loss = eval->loss;
    *accuracy = eval->accuracy;
  };
  auto cuda = MakeCuda(shape);
  auto cpu = MakeCpu(shape);
  ASSERT_TRUE(cuda && cpu);
  double gpu_loss = 0, gpu_acc = 0, cpu_loss = 0, cpu_acc = 0;
  run(cuda.get(), &gpu_loss, &gpu_acc);
  run(cpu.get(), &cpu_loss, &cpu_acc);
  EXPECT_GE(gpu_acc, 0.97);
  EXPECT_NEAR(gpu_acc, cpu_acc, 0.01);
  EXPECT_NEAR(gpu_loss, cpu_loss, 0.01 + 0.05 * cpu_loss);
}

TEST(CudaBackendTest, RejectsBadInputsExactlyLikeTheCpuBackend) {
  GEOPS_SKIP_WITHOUT_CUDA_DEVICE();
  const MlpShape shape{{2, 4, 3}};
  const Tables params = gpu_test::RandomTables(shape, 3);
  const std::vector<float> x = {0.5f, -1.0f, 2.0f, 0.0f, 1.0f, 1.5f};
  const std::vector<int32_t> y = {0, 2, 1};
  auto cuda = MakeCuda(shape);
  auto cpu = MakeCpu(shape);
  ASSERT_TRUE(cuda && cpu);
  Tables deltas = Filled(params, 7.0f);
  auto out = MutPtrs(deltas);
  auto p = Ptrs(params);
  // Runs `call` on both backends: same refusal, word for word.
  auto same = [&](const std::function<Status(ComputeBackend&)>& call, const char* what) {
    const Status g = call(*cuda);
    const Status c = call(*cpu);
    EXPECT_FALSE(c.ok()) << what;
    EXPECT_EQ(g.code(), c.code()) << what << ": " << g.ToString();
    EXPECT_EQ(g.message(), c.message()) << what;
  };
  using Tp = std::span<const float* const>;
  using Dp = std::span<float* const>;
  auto train = [](Tp tables, Batch batch, float lr, Dp d) {
    return [=](ComputeBackend& b) { return b.TrainStep(tables, batch, lr, d).status(); };
  };
  auto eval = [](Tp tables, Batch batch) {
    return [=](ComputeBackend& b) { return b.Evaluate(tables, batch).status(); };
  };
  const Batch good{x.data(), y.data(), 3};
  std::vector<int32_t> bad_y = {2, 3, 1};
  const Batch bad_label{x.data(), bad_y.data(), 3};
  same(train(p, bad_label, 0.1f, out), "label");
  same(eval(p, bad_label), "eval label");
  auto fewer = p;
  fewer.pop_back();
  same(train(fewer, good, 0.1f, out), "tables");
  auto fewer_out = out;
  fewer_out.pop_back();
  same(train(p, good, 0.1f, fewer_out), "deltas");
  same(train(p, Batch{x.data(), y.data(), 0}, 0.1f, out), "n = 0");
  same(train(p, Batch{nullptr, y.data(), 3}, 0.1f, out), "null x");
  Tables nan_params = params;
  nan_params[2][5] = std::numeric_limits<float>::quiet_NaN();
  const auto nan_p = Ptrs(nan_params);
  same(train(nan_p, good, 0.1f, out), "NaN table");
  same(eval(nan_p, good), "eval NaN table");
  std::vector<float> inf_x = x;
  inf_x[3] = std::numeric_limits<float>::infinity();
  const Batch inf_batch{inf_x.data(), y.data(), 3};
  same(train(p, inf_batch, 0.1f, out), "Inf input");
  same(train(p, good, -0.1f, out), "lr");
  for (const auto& t : deltas) {
    for (float v : t) ASSERT_EQ(v, 7.0f) << "a rejected call wrote an update";
  }
  // The device path checks the batch the same way.
  auto cache = GpuParamCache::Create(MlpTables(shape), cuda->device());
  ASSERT_TRUE(cache.ok());
  ASSERT_TRUE((*cache)->BeginStep(p, 1).ok());
  EXPECT_EQ(cuda->EnqueueTrainStep(cache->get(), inf_batch, 0.1f),
            ValidateBatch(shape, inf_batch, kMaxTrainBatch));
  // ... and a NaN table staged by the cache gives the CPU backend's message.
  ASSERT_TRUE((*cache)->BeginStep(nan_p, 2).ok());
  EXPECT_EQ(cuda->EnqueueTrainStep(cache->get(), good, 0.1f), ValidateParams(shape, nan_p));
  // The backend is still usable after every refusal.
  EXPECT_TRUE(cuda->TrainStep(p, good, 0.1f, out).ok());
}

TEST(CudaBackendTest, ReportsDivergenceLikeTheCpuBackend) {
  GEOPS_SKIP_WITHOUT_CUDA_DEVICE();
  const MlpShape shape{{2, 4, 3}};
  Tables params = gpu_test::RandomTables(shape, 3);
  for (auto& t : params) std::fill(t.begin(), t.end(), 1e20f);
  const std::vector<float> ones(6, 1.0f);
  const std::vector<int32_t> y = {0, 2, 1};
  auto cuda = MakeCuda(shape);
  auto cpu = MakeCpu(shape);
  ASSERT_TRUE(cuda && cpu);
  Tables deltas = Filled(params, 0.0f);
  auto g = cuda->TrainStep(Ptrs(params), Batch{ones.data(), y.data(), 3}, 0.1f, MutPtrs(deltas));
  auto c = cpu->TrainStep(Ptrs(params), Batch{ones.data(), y.data(), 3}, 0.1f, MutPtrs(deltas));
  EXPECT_EQ(g.status().code(), StatusCode::kFailedPrecondition) << g.status().ToString();
  EXPECT_EQ(g.status().message(), c.status().message());
}

TEST(CudaBackendTest, OutOfDeviceMemoryIsResourceExhaustedNotACrash) {
  GEOPS_SKIP_WITHOUT_CUDA_DEVICE();
  auto huge = DeviceBuffer::Allocate(int64_t{1} << 50, "a test");
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(huge.status().message().find("1125899906842624 bytes"), std::string::npos)
      << huge.status().ToString();

  // 65536 examples x 2^20 hidden units of activations is 256 GiB.
  const MlpShape shape{{8, 1 << 20, 2}};
  const Tables params = gpu_test::RandomTables(shape, 1);
  Tables deltas = Filled(params, 0.0f);
  auto cuda = MakeCuda(shape);
  ASSERT_TRUE(cuda);
  const Dataset big = gpu_test::RandomData(shape, kMaxTrainBatch, 2);
  auto r = cuda->TrainStep(Ptrs(params), big.AsBatch(), 0.1f, MutPtrs(deltas));
  ASSERT_EQ(r.status().code(), StatusCode::kResourceExhausted) << r.status().ToString();
  EXPECT_NE(r.status().message().find("bytes"), std::string::npos);
  // A batch that fits still trains afterwards.
  const Dataset small = gpu_test::RandomData(shape, 4, 3);
  auto ok = cuda->TrainStep(Ptrs(params), small.AsBatch(), 0.1f, MutPtrs(deltas));
  EXPECT_TRUE(ok.ok()) << ok.status().ToString();
}

TEST(CudaBackendTest, ScratchStopsGrowingAfterTheFirstStep) {
  GEOPS_SKIP_WITHOUT_CUDA_DEVICE();
  const MlpShape shape{{8, 16, 3}};
  const Tables params = gpu_test::RandomTables(shape, 1);
  Tables deltas = Filled(params, 0.0f);
  const Dataset data = gpu_test::Blobs(64, 2);
  auto cuda = MakeCuda(shape);
  ASSERT_TRUE(cuda);
  ASSERT_TRUE(cuda->TrainStep(Ptrs(params), data.AsBatch(), 0.1f, MutPtrs(deltas)).ok());
  const int64_t after_first = cuda->scratch_bytes();
  EXPECT_GT(after_first, 0);
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(cuda->TrainStep(Ptrs(params), data.AsBatch(), 0.1f, MutPtrs(deltas)).ok());
  }
  EXPECT_EQ(cuda->scratch_bytes(), after_first);
}

}  // namespace
}  // namespace geops::worker::cuda
