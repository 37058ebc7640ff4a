// Tests of the MLP model tables, backend selection and the CPU backend's math.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "worker/blas_core.h"
#include "worker/compute_backend.h"
#include "worker/cpu_backend.h"
#include "worker/dataset.h"
#include "worker/mlp_model.h"

namespace geops::worker {
namespace {

using Tables = std::vector<std::vector<float>>;

std::vector<const float*> Ptrs(const Tables& t) {
  std::vector<const float*> out;
  for (const auto& v : t) out.push_back(v.data());
  return out;
}
std::vector<float*> MutPtrs(Tables& t) {
  std::vector<float*> out;
  for (auto& v : t) out.push_back(v.data());
  return out;
}
Tables ZerosLike(const Tables& t) {
  Tables out;
  for (const auto& v : t) out.emplace_back(v.size(), 0.0f);
  return out;
}

// Uniform random tables (biases too, so their gradients are exercised).
Tables RandomTables(const MlpShape& shape, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  Tables out;
  for (int i = 0; i < shape.num_layers(); ++i) {
    out.emplace_back(static_cast<size_t>(shape.sizes[i]) * shape.sizes[i + 1]);
    out.emplace_back(shape.sizes[i + 1]);
  }
  for (auto& t : out) {
    for (float& v : t) v = u(rng);
  }
  return out;
}

// Reference mean loss in double precision, straight from the definition.
double ReferenceLoss(const MlpShape& shape, const std::vector<std::vector<double>>& p,
                     const std::vector<float>& x, const std::vector<int32_t>& y) {
  const int n = static_cast<int>(y.size());
  double total = 0.0;
  for (int r = 0; r < n; ++r) {
    std::vector<double> a(x.begin() + r * shape.inputs(), x.begin() + (r + 1) * shape.inputs());
    for (int l = 0; l < shape.num_layers(); ++l) {
      const int in = shape.sizes[l], out = shape.sizes[l + 1];
      std::vector<double> z(p[2 * l + 1].begin(), p[2 * l + 1].end());
      for (int i = 0; i < in; ++i) {
        for (int j = 0; j < out; ++j) z[j] += a[i] * p[2 * l][i * out + j];
      }
      if (l + 1 < shape.num_layers()) {
        for (double& v : z) v = std::max(v, 0.0);
      }
      a = z;
    }
    double m = a[0];
    for (double v : a) m = std::max(m, v);
    double s = 0.0;
    for (double v : a) s += std::exp(v - m);
    total += m + std::log(s) - a[y[r]];
  }
  return total / n;
}

std::vector<std::vector<double>> ToDouble(const Tables& t) {
  std::vector<std::vector<double>> out;
  for (const auto& v : t) out.emplace_back(v.begin(), v.end());
  return out;
}

TEST(MlpModelTest, ParsesShapeStrings) {
  auto s = ParseMlpShape("784-512-256-10");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->sizes, (std::vector<int>{784, 512, 256, 10}));
  EXPECT_EQ(s->ToString(), "784-512-256-10");
  EXPECT_EQ(*s, MlpShape{});
  EXPECT_EQ(s->num_layers(), 3);
  EXPECT_EQ(s->num_parameters(), 784 * 512 + 512 + 512 * 256 + 256 + 256 * 10 + 10);
}

TEST(MlpModelTest, RejectsMalformedShapesWithClearErrors) {
  for (const char* bad : {"", "784", "784--10", "784-a-10", "-784-10", "784-10-", "784-0-10",
                          "784-+5-10", "784- 5-10", "784-99999999999-10", "784-1"}) {
    auto s = ParseMlpShape(bad);
    ASSERT_FALSE(s.ok()) << "accepted '" << bad << "'";
    EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument) << bad;
    if (*bad != '\0') {
      EXPECT_NE(s.status().message().find(bad), std::string::npos) << s.status().ToString();
    }
  }
}

TEST(MlpModelTest, TablesAreWeightThenBiasWithHeUniformInit) {
  MlpShape shape{{784, 128, 10}};
  auto spec = MlpModelSpec(shape, 16 * 1024, 7);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  ASSERT_EQ(spec->num_tables(), 4);
  EXPECT_EQ(spec->table(0).name, "fc1.weight");
  EXPECT_EQ(spec->table(0).rows, 784);
  EXPECT_EQ(spec->table(0).cols, 128);
  EXPECT_EQ(spec->table(0).init, InitKind::kUniform);
  EXPECT_FLOAT_EQ(spec->table(0).init_scale, std::sqrt(6.0f / 784));
  EXPECT_EQ(spec->table(1).name, "fc1.bias");
  EXPECT_EQ(spec->table(1).rows, 1);
  EXPECT_EQ(spec->table(1).cols, 128);
  EXPECT_EQ(spec->table(1).init, InitKind::kZeros);
  EXPECT_EQ(spec->table(2).name, "fc2.weight");
  EXPECT_FLOAT_EQ(spec->table(2).init_scale, std::sqrt(6.0f / 128));
  EXPECT_EQ(spec->seed(), 7u);

  auto back = MlpShapeFromSpec(*spec);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, shape);

  Tables init = InitialTables(*spec);
  const float bound = std::sqrt(6.0f / 784);
  float biggest = 0.0f;
  for (float v : init[0]) biggest = std::max(biggest, std::abs(v));
  EXPECT_LE(biggest, bound);
  EXPECT_GT(biggest, 0.9f * bound);
  for (float v : init[1]) EXPECT_EQ(v, 0.0f);
}

TEST(MlpModelTest, ShapeFromSpecRejectsOtherModels) {
  auto spec = ModelSpec::Create({{"fc1.weight", 4, 3}, {"fc1.bias", 1, 2}});
  ASSERT_TRUE(spec.ok());
  auto s = MlpShapeFromSpec(*spec);
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("fc1.bias"), std::string::npos);
  auto other = ModelSpec::Create({{"embedding", 4, 3}, {"fc1.bias", 1, 3}});
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(MlpShapeFromSpec(*other).status().code(), StatusCode::kInvalidArgument);
}

TEST(BackendKindTest, ParsesKnownNamesAndRejectsOthers) {
  EXPECT_EQ(*ParseBackendKind("cpu"), BackendKind::kCpu);
  EXPECT_EQ(*ParseBackendKind("auto"), BackendKind::kAuto);
  auto cuda = ParseBackendKind("cuda");
  if (CudaBackendBuilt()) {
    EXPECT_EQ(*cuda, BackendKind::kCuda);
  } else {
    EXPECT_EQ(cuda.status().code(), StatusCode::kFailedPrecondition);
  }
  auto bad = ParseBackendKind("tpu");
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("tpu"), std::string::npos);
  EXPECT_EQ(ParseBackendKind("CPU").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(BackendKindName(BackendKind::kCuda), "cuda");
}

TEST(CpuBackendTest, CreateRejectsBadThreadsAndShapes) {
  EXPECT_EQ(NewCpuBackend(MlpShape{{5, 3}}, 0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(NewCpuBackend(MlpShape{{5}}, 1).status().code(), StatusCode::kInvalidArgument);
  auto ok = NewCpuBackend(MlpShape{{5, 3}}, 1);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ((*ok)->name(), "cpu(openblas " + LoadedBlasCore() + ", 1 thread)");
}

struct TinyProblem {
  MlpShape shape{{5, 4, 3}};
  Tables params = RandomTables(shape, 42);
  std::vector<float> x;
  std::vector<int32_t> y = {2, 0, 1};
  TinyProblem() {
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (int i = 0; i < 3 * 5; ++i) x.push_back(u(rng));
  }
  Batch batch() const { return Batch{x.data(), y.data(), 3}; }
};

TEST(CpuBackendTest, DeltasMatchFiniteDifferencesOfTheLoss) {
  TinyProblem p;
  auto backend = NewCpuBackend(p.shape, 1);
  ASSERT_TRUE(backend.ok());
  Tables deltas = ZerosLike(p.params);
  const float lr = 1.0f;
  auto stats = (*backend)->TrainStep(Ptrs(p.params), p.batch(), lr, MutPtrs(deltas));
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();

  auto ref = ToDouble(p.params);
  const double ref_loss = ReferenceLoss(p.shape, ref, p.x, p.y);
  EXPECT_NEAR(stats->loss, ref_loss, 1e-5 * ref_loss);

  // Central differences in double precision around the float parameters.
  const double eps = 1e-4;
  int checked = 0;
  for (size_t t = 0; t < ref.size(); ++t) {
    for (size_t k = 0; k < ref[t].size(); ++k) {
      const double saved = ref[t][k];
      ref[t][k] = saved + eps;
      const double up = ReferenceLoss(p.shape, ref, p.x, p.y);
      ref[t][k] = saved - eps;
      const double down = ReferenceLoss(p.shape, ref, p.x, p.y);
      ref[t][k] = saved;
      const double fd = (up - down) / (2 * eps);
      const double analytic = -deltas[t][k] / lr;
      if (std::abs(fd) > 1e-4) {
        EXPECT_NEAR(analytic, fd, 1e-3 * std::abs(fd)) << "table " << t << " element " << k;
        ++checked;
      } else {
        EXPECT_NEAR(analytic, fd, 1e-6) << "table " << t << " element " << k;
      }
    }
  }
  EXPECT_GT(checked, 20);  // most of the 39 parameters carry gradient

  // The same through the backend's own float loss: coarser, same answer.
  const double feps = 1e-2;
  for (size_t t = 0; t < p.params.size(); ++t) {
    for (size_t k = 0; k < p.params[t].size(); ++k) {
      Tables moved = p.params;
      moved[t][k] += static_cast<float>(feps);
      auto up = (*backend)->Evaluate(Ptrs(moved), p.batch());
      moved[t][k] -= static_cast<float>(2 * feps);
      auto down = (*backend)->Evaluate(Ptrs(moved), p.batch());
      ASSERT_TRUE(up.ok() && down.ok());
      const double fd = (up->loss - down->loss) / (2 * feps);
      EXPECT_NEAR(-deltas[t][k], fd, 2e-3 * std::abs(fd) + 2e-4) << "table " << t << " element " << k;
    }
  }
}

TEST(CpuBackendTest, DeltasScaleWithLearningRateAndAreZeroAtZeroRate) {
  TinyProblem p;
  auto backend = NewCpuBackend(p.shape, 1);
  ASSERT_TRUE(backend.ok());
  Tables d1 = ZerosLike(p.params), d2 = ZerosLike(p.params), d0 = ZerosLike(p.params);
  ASSERT_TRUE((*backend)->TrainStep(Ptrs(p.params), p.batch(), 0.1f, MutPtrs(d1)).ok());
  ASSERT_TRUE((*backend)->TrainStep(Ptrs(p.params), p.batch(), 0.4f, MutPtrs(d2)).ok());
  ASSERT_TRUE((*backend)->TrainStep(Ptrs(p.params), p.batch(), 0.0f, MutPtrs(d0)).ok());
  for (size_t t = 0; t < d1.size(); ++t) {
    for (size_t k = 0; k < d1[t].size(); ++k) {
      EXPECT_NEAR(d2[t][k], 4.0f * d1[t][k], 1e-6f + 1e-5f * std::abs(d2[t][k]));
      EXPECT_EQ(d0[t][k], 0.0f);
    }
  }
}

// Three well-separated Gaussian blobs in 8 dimensions.
Dataset Blobs(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> noise(0.0f, 0.5f);
  const float centres[3][8] = {{2, 0, 0, 1, 0, 0, -1, 0},
                               {0, 2, 0, 0, -1, 0, 1, 0},
                               {0, 0, 2, -1, 1, 0, 0, 1}};
  Dataset d;
  d.n = n;
  d.dims = 8;
  d.num_classes = 3;
  for (int i = 0; i < n; ++i) {
    const int c = i % 3;
    d.y.push_back(c);
    for (int j = 0; j < 8; ++j) d.x.push_back(centres[c][j] + noise(rng));
  }
  return d;
}

TEST(CpuBackendTest, LossFallsAndAccuracyRisesOnSeparableData) {
  MlpShape shape{{8, 16, 3}};
  auto spec = MlpModelSpec(shape, 1024, 3);
  ASSERT_TRUE(spec.ok());
  Tables params = InitialTables(*spec);
  Tables deltas = ZerosLike(params);
  auto backend = NewCpuBackend(shape, 1);
  ASSERT_TRUE(backend.ok());
  const Dataset data = Blobs(600, 11);
  auto before = (*backend)->Evaluate(Ptrs(params), data.AsBatch());
  ASSERT_TRUE(before.ok()) << before.status().ToString();
  auto sampler = BatchSampler::Create(&data, 32, 5, 0);
  ASSERT_TRUE(sampler.ok());
  double first_epoch_loss = 0.0, last_epoch_loss = 0.0;
  const int64_t steps = sampler->batches_per_epoch();
  for (int epoch = 0; epoch < 10; ++epoch) {
    double sum = 0.0;
    for (int64_t s = 0; s < steps; ++s) {
      auto stats = (*backend)->TrainStep(Ptrs(params), sampler->Next(), 0.1f, MutPtrs(deltas));
      ASSERT_TRUE(stats.ok()) << stats.status().ToString();
      sum += stats->loss;
      for (size_t t = 0; t < params.size(); ++t) {
        for (size_t k = 0; k < params[t].size(); ++k) params[t][k] += deltas[t][k];
      }
    }
    if (epoch == 0) first_epoch_loss = sum / steps;
    last_epoch_loss = sum / steps;
  }
  auto after = (*backend)->Evaluate(Ptrs(params), data.AsBatch());
  ASSERT_TRUE(after.ok());
  EXPECT_LT(last_epoch_loss, 0.5 * first_epoch_loss);
  EXPECT_LT(after->loss, 0.2 * before->loss);
  EXPECT_GE(after->accuracy, 0.97);
  EXPECT_EQ(after->n, 600);
}

TEST(CpuBackendTest, EvaluateOverManySlicesMatchesReference) {
  MlpShape shape{{8, 16, 3}};
  Tables params = RandomTables(shape, 9);
  const Dataset data = Blobs(2 * kCpuEvalSliceRows + 37, 4);
  auto backend = NewCpuBackend(shape, 1);
  ASSERT_TRUE(backend.ok());
  auto stats = (*backend)->Evaluate(Ptrs(params), data.AsBatch());
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  const double ref = ReferenceLoss(shape, ToDouble(params), data.x, data.y);
  EXPECT_NEAR(stats->loss, ref, 1e-5 * ref);
  EXPECT_EQ(stats->n, data.n);
  EXPECT_DOUBLE_EQ(stats->accuracy, static_cast<double>(stats->correct) / data.n);
}

TEST(CpuBackendTest, ScratchStopsGrowingAfterTheFirstStep) {
  MlpShape shape{{8, 16, 3}};
  Tables params = RandomTables(shape, 1);
  Tables deltas = ZerosLike(params);
  const Dataset data = Blobs(64, 2);
  auto backend = CpuBackend::Create(shape, 1);
  ASSERT_TRUE(backend.ok());
  ASSERT_TRUE((*backend)->TrainStep(Ptrs(params), data.AsBatch(), 0.1f, MutPtrs(deltas)).ok());
  const int64_t after_first = (*backend)->scratch_floats();
  EXPECT_GT(after_first, 0);
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE((*backend)->TrainStep(Ptrs(params), data.AsBatch(), 0.1f, MutPtrs(deltas)).ok());
  }
  EXPECT_EQ((*backend)->scratch_floats(), after_first);
}

TEST(CpuBackendTest, RejectsBadInputsAndLeavesDeltasUntouched) {
  TinyProblem p;
  auto backend = NewCpuBackend(p.shape, 1);
  ASSERT_TRUE(backend.ok());
  ComputeBackend& b = **backend;
  Tables deltas = ZerosLike(p.params);
  for (auto& t : deltas) std::fill(t.begin(), t.end(), 7.0f);
  auto untouched = [&] {
    for (const auto& t : deltas) {
      for (float v : t) {
        if (v != 7.0f) return false;
      }
    }
    return true;
  };
  auto params = Ptrs(p.params);
  auto out = MutPtrs(deltas);

  std::vector<int32_t> bad_y = {2, 3, 1};
  auto r = b.TrainStep(params, Batch{p.x.data(), bad_y.data(), 3}, 0.1f, out);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("index 1"), std::string::npos) << r.status().ToString();
  bad_y[1] = -1;
  EXPECT_EQ(b.TrainStep(params, Batch{p.x.data(), bad_y.data(), 3}, 0.1f, out).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(b.Evaluate(params, Batch{p.x.data(), bad_y.data(), 3}).status().code(),
            StatusCode::kInvalidArgument);

  auto fewer = params;
  fewer.pop_back();
  r = b.TrainStep(fewer, p.batch(), 0.1f, out);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("4"), std::string::npos);
  auto fewer_out = out;
  fewer_out.pop_back();
  EXPECT_EQ(b.TrainStep(params, p.batch(), 0.1f, fewer_out).status().code(),
            StatusCode::kInvalidArgument);

  EXPECT_EQ(b.TrainStep(params, Batch{p.x.data(), p.y.data(), 0}, 0.1f, out).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(b.Evaluate(params, Batch{p.x.data(), p.y.data(), 0}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(b.TrainStep(params, Batch{nullptr, p.y.data(), 3}, 0.1f, out).status().code(),
            StatusCode::kInvalidArgument);

  Tables nan_params = p.params;
  nan_params[2][5] = std::numeric_limits<float>::quiet_NaN();
  r = b.TrainStep(Ptrs(nan_params), p.batch(), 0.1f, out);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("fc2.weight"), std::string::npos) << r.status().ToString();
  EXPECT_NE(r.status().message().find("element 5"), std::string::npos) << r.status().ToString();
  EXPECT_EQ(b.Evaluate(Ptrs(nan_params), p.batch()).status().code(), StatusCode::kInvalidArgument);

  std::vector<float> inf_x = p.x;
  inf_x[6] = std::numeric_limits<float>::infinity();
  r = b.TrainStep(params, Batch{inf_x.data(), p.y.data(), 3}, 0.1f, out);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("example 1"), std::string::npos) << r.status().ToString();

  EXPECT_EQ(b.TrainStep(params, p.batch(), std::nanf(""), out).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(b.TrainStep(params, p.batch(), -0.1f, out).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE(untouched());
}

TEST(CpuBackendTest, ReportsDivergenceInsteadOfReturningNonFiniteDeltas) {
  TinyProblem p;
  for (auto& t : p.params) {
    for (float& v : t) v = 1e20f;
  }
  auto backend = NewCpuBackend(p.shape, 1);
  ASSERT_TRUE(backend.ok());
  Tables deltas = ZerosLike(p.params);
  std::vector<float> ones(p.x.size(), 1.0f);
  auto r = (*backend)->TrainStep(Ptrs(p.params), Batch{ones.data(), p.y.data(), 3}, 0.1f,
                                 MutPtrs(deltas));
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition) << r.status().ToString();
}

}  // namespace
}  // namespace geops::worker
