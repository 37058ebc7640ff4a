// Helpers of the GPU worker tests: skipping without a device, random MLP
// tables and batches, and comparing updates between backends.
#ifndef GEOPS_TESTS_WORKER_GPU_TEST_UTIL_H_
#define GEOPS_TESTS_WORKER_GPU_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "worker/cuda/cuda_worker.h"
#include "worker/dataset.h"
#include "worker/mlp_model.h"

// Skips the test, saying why, unless a CUDA device is usable.
#define GEOPS_SKIP_WITHOUT_CUDA_DEVICE()                                          \
  do {                                                                            \
    const ::geops::Status geops_dev_ = ::geops::worker::cuda::CudaDeviceStatus(); \
    if (!geops_dev_.ok()) GTEST_SKIP() << geops_dev_.message();                   \
  } while (0)

namespace geops::worker::gpu_test {

using Tables = std::vector<std::vector<float>>;

inline std::vector<const float*> Ptrs(const Tables& t) {
  std::vector<const float*> out;
  for (const auto& v : t) out.push_back(v.data());
  return out;
}

inline std::vector<float*> MutPtrs(Tables& t) {
  std::vector<float*> out;
  for (auto& v : t) out.push_back(v.data());
  return out;
}

inline Tables Filled(const Tables& like, float value) {
  Tables out;
  for (const auto& v : like) out.emplace_back(v.size(), value);
  return out;
}

// Uniform tables scaled like He init (biases random too, so their gradients
// are exercised).
inline Tables RandomTables(const MlpShape& shape, uint32_t seed) {
  std::mt19937 rng(seed);
  Tables out;
  for (int i = 0; i < shape.num_layers(); ++i) {
    const float a = std::sqrt(6.0f / shape.sizes[i]);
    std::uniform_real_distribution<float> u(-a, a);
    out.emplace_back(static_cast<size_t>(shape.sizes[i]) * shape.sizes[i + 1]);
    for (float& v : out.back()) v = u(rng);
    out.emplace_back(shape.sizes[i + 1]);
    for (float& v : out.back()) v = 0.1f * u(rng);
  }
  return out;
}

// n random examples of `shape`: inputs in [0, 1), labels uniform.
inline Dataset RandomData(const MlpShape& shape, int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  std::uniform_int_distribution<int32_t> label(0, shape.classes() - 1);
  Dataset d;
  d.n = n;
  d.dims = shape.inputs();
  d.num_classes = shape.classes();
  d.x.resize(static_cast<size_t>(n) * d.dims);
  for (float& v : d.x) v = u(rng);
  d.y.resize(n);
  for (int32_t& v : d.y) v = label(rng);
  return d;
}

// Three separable Gaussian blobs in 8 dimensions (as the CPU backend's test).
inline Dataset Blobs(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> noise(0.0f, 0.5f);
  const float centres[3][8] = {
      {2, 0, 0, 1, 0, 0, -1, 0}, {0, 2, 0, 0, -1, 0, 1, 0}, {0, 0, 2, -1, 1, 0, 0, 1}};
  Dataset d;
  d.n = n;
  d.dims = 8;
  d.num_classes = 3;
  for (int i = 0; i < n; ++i) {
    d.y.push_back(i % 3);
    for (int j = 0; j < 8; ++j) d.x.push_back(centres[i % 3][j] + noise(rng));
  }
  return d;
}

// Largest |a - b| over a table, relative to the largest |b| (the reference).
inline double RelativeMaxError(const std::vector<float>& a, const std::vector<float>& b) {
  double err = 0.0, scale = 0.0;
  for (size_t k = 0; k < a.size(); ++k) {
    err = std::max(err, std::abs(double{a[k]} - double{b[k]}));
    scale = std::max(scale, std::abs(double{b[k]}));
  }
  return scale == 0.0 ? err : err / scale;
}

// Every table of `got` within `tol` (relative, see above) of `want`.
inline void ExpectTablesNear(const Tables& got, const Tables& want, double tol,
                             const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t t = 0; t < got.size(); ++t) {
    ASSERT_EQ(got[t].size(), want[t].size());
    EXPECT_LE(RelativeMaxError(got[t], want[t]), tol) << what << ", table " << t;
  }
}

}  // namespace geops::worker::gpu_test

#endif  // GEOPS_TESTS_WORKER_GPU_TEST_UTIL_H_
