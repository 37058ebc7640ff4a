#include "worker/stream_copy.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace geops::worker {
namespace {

// Every alignment of the destination (the streaming path needs 16 bytes)
// and lengths around the 64-byte step: each element copied exactly, nothing
// written outside [dst, dst + n).
TEST(StreamCopyTest, CopiesEveryElementAtEveryAlignmentAndNothingElse) {
  std::vector<float> src(300);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<float>(i) * 0.5f - 7.25f;
  for (int64_t shift = 0; shift < 4; ++shift) {
    for (int64_t src_shift = 0; src_shift < 4; ++src_shift) {
      for (int64_t n : {0, 1, 3, 4, 15, 16, 17, 31, 64, 65, 255}) {
        std::vector<float> dst(300, -1.0f);
        StreamCopy(dst.data() + shift, src.data() + src_shift, n);
        StreamFence();
        for (int64_t i = 0; i < static_cast<int64_t>(dst.size()); ++i) {
          const bool inside = i >= shift && i < shift + n;
          const float want = inside ? src[i - shift + src_shift] : -1.0f;
          ASSERT_EQ(dst[i], want) << "shift " << shift << ", src shift " << src_shift << ", n " << n << ", i " << i;
        }
      }
    }
  }
}

}  // namespace
}  // namespace geops::worker
