#include "common/process_cpu.h"

#include <chrono>
#include <thread>

#include <gtest/gtest.h>

namespace geops {
namespace {

// Spins until the process's CPU clock has moved at least `seconds`, or a
// wall-clock second has passed; returns the CPU seconds it saw go by.
double Spin(double seconds) {
  const double start = ProcessCpuSeconds();
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  volatile double sink = 0;
  while (ProcessCpuSeconds() - start < seconds && std::chrono::steady_clock::now() < give_up) {
    for (int i = 0; i < 10000; ++i) sink = sink + i * 0.5;
  }
  return ProcessCpuSeconds() - start;
}

TEST(ProcessCpuTest, CountsTheWorkOfEveryThread) {
  ASSERT_GE(ProcessCpuSeconds(), 0.0);
  EXPECT_GE(Spin(0.05), 0.05);
  // Work done on another thread counts for the process too.
  const double before = ProcessCpuSeconds();
  std::thread t([] { Spin(0.05); });
  t.join();
  EXPECT_GE(ProcessCpuSeconds() - before, 0.05);
}

TEST(ProcessCpuTest, SleepingCostsNoCpu) {
  const double before = ProcessCpuSeconds();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_LT(ProcessCpuSeconds() - before, 0.1);
}

}  // namespace
}  // namespace geops
