// SplitMix64: a small, well-mixed pseudo-random generator that gives the same
// sequence on every platform (unlike <random>'s distributions), so initial
// values and data shuffles are reproducible everywhere. Not for security.
// Pure functions over caller-owned state; thread-compatible.
#ifndef GEOPS_COMMON_SPLITMIX_H_
#define GEOPS_COMMON_SPLITMIX_H_

#include <cstdint>

namespace geops {

// Advances `state` and returns the next 64 random bits.
inline uint64_t SplitMix64(uint64_t* state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Uniform in [0, 1) with 24 bits of precision.
inline float SplitMixUnit(uint64_t* state) {
  return static_cast<float>(SplitMix64(state) >> 40) * 0x1.0p-24f;
}

// Uniform in [0, bound) by multiply-shift; bias < bound / 2^64.
inline uint64_t SplitMixBelow(uint64_t* state, uint64_t bound) {
  return static_cast<uint64_t>((static_cast<unsigned __int128>(SplitMix64(state)) * bound) >> 64);
}

}  // namespace geops

#endif  // GEOPS_COMMON_SPLITMIX_H_
