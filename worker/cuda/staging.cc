#include "worker/cuda/staging.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/float_kernels.h"
#include "worker/compute_backend.h"

namespace geops::worker::cuda {

int64_t CopyAndFindNonFinite(float* dst, const float* src, int64_t n) {
  // Blocks small enough that the check reads what the copy just left in L1.
  constexpr int64_t kBlock = 4096;
  int64_t first = -1;
  for (int64_t start = 0; start < n; start += kBlock) {
    const int64_t len = std::min(kBlock, n - start);
    std::memcpy(dst + start, src + start, static_cast<size_t>(len) * sizeof(float));
    if (first < 0) {
      const int64_t bad = FirstNonFinite(dst + start, len);
      if (bad >= 0) first = start + bad;
    }
  }
  return first;
}

std::string NonFiniteParamMessage(const std::string& table, int64_t cols, int64_t index,
                                  float value) {
  return "parameter table '" + table + "' element " + std::to_string(index) + " (row " +
         std::to_string(index / cols) + ", col " + std::to_string(index % cols) + ") is " +
         (std::isnan(value) ? "NaN" : "infinite");
}

}  // namespace geops::worker::cuda
