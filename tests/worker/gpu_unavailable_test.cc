// The GPU suite of a build without CUDA: it says so, and the CUDA entry
// points fail cleanly instead of pretending.
#include <gtest/gtest.h>

#include "worker/cpu_backend.h"
#include "worker/cuda/cuda_trainer_path.h"
#include "worker/cuda/cuda_worker.h"

namespace geops::worker::cuda {
namespace {

TEST(GpuUnavailableTest, GpuTestsNeedACudaBuild) {
  GTEST_SKIP() << "built without CUDA: the GPU tests are not compiled in";
}

TEST(GpuUnavailableTest, CudaEntryPointsReportTheMissingToolkit) {
  EXPECT_FALSE(CudaBackendBuilt());
  EXPECT_FALSE(CudaDeviceAvailable());
  EXPECT_EQ(CudaDeviceStatus().code(), StatusCode::kFailedPrecondition);
  auto b = NewCudaBackend(MlpShape{});
  EXPECT_EQ(b.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(b.status().message().find("built without CUDA"), std::string::npos);
  auto cpu = NewCpuBackend(MlpShape{}, 1);
  ASSERT_TRUE(cpu.ok());
  auto path = CudaTrainerPath::ForBackend(cpu->get(), nullptr);
  ASSERT_TRUE(path.ok());
  EXPECT_EQ(*path, nullptr);
}

}  // namespace
}  // namespace geops::worker::cuda
