// A stand-in for libFuzzer's driver where the compiler is not Clang: runs
// LLVMFuzzerTestOneInput on every seed, then on a fixed number of seeded
// mutations of them (byte flips, insertions, deletions, truncations,
// splices, interesting integers), deterministically for a given --seed.
// libFuzzer itself (coverage-guided, with sanitizers) runs in
// experiments/run_fuzz.sh; this keeps the targets built and exercised in
// every test run.
//
// Usage: NAME [--runs=N] [--seed=S] [SEED_FILE_OR_DIR...]
//        NAME --write_seeds=DIR   (the target's own seeds, for libFuzzer)
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
// Valid inputs the target provides (real messages made by geops' encoders).
std::vector<std::vector<uint8_t>> GeopsFuzzSeeds();

namespace {

using Bytes = std::vector<uint8_t>;

void Load(const std::filesystem::path& path, std::vector<Bytes>* out) {
  if (std::filesystem::is_directory(path)) {
    for (const auto& entry : std::filesystem::directory_iterator(path)) Load(entry.path(), out);
    return;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "cannot read seed %s\n", path.c_str());
    std::exit(2);
  }
  out->emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

Bytes Mutate(const std::vector<Bytes>& seeds, std::mt19937_64& rng) {
  Bytes b = seeds[rng() % seeds.size()];
  const int steps = 1 + static_cast<int>(rng() % 4);
  for (int s = 0; s < steps; ++s) {
    switch (rng() % 7) {
      case 0:  // flip bits of one byte
        if (!b.empty()) b[rng() % b.size()] ^= static_cast<uint8_t>(1u << (rng() % 8));
        break;
      case 1:  // set a byte
        if (!b.empty()) b[rng() % b.size()] = static_cast<uint8_t>(rng());
        break;
      case 2:  // insert bytes
        b.insert(b.begin() + static_cast<std::ptrdiff_t>(b.empty() ? 0 : rng() % (b.size() + 1)),
                 1 + rng() % 8, static_cast<uint8_t>(rng()));
        break;
      case 3:  // delete bytes
        if (b.size() > 1) {
          const size_t at = rng() % b.size();
          const size_t n = std::min<size_t>(b.size() - at, 1 + rng() % 8);
          b.erase(b.begin() + static_cast<std::ptrdiff_t>(at), b.begin() + static_cast<std::ptrdiff_t>(at + n));
        }
        break;
      case 4:  // truncate
        if (!b.empty()) b.resize(rng() % b.size() + 1);
        break;
      case 5: {  // splice the tail of another seed
        const Bytes& other = seeds[rng() % seeds.size()];
        if (!b.empty() && !other.empty()) {
          b.resize(rng() % b.size() + 1);
          b.insert(b.end(), other.begin() + static_cast<std::ptrdiff_t>(rng() % other.size()), other.end());
        }
        break;
      }
      default: {  // an interesting 32-bit value (sizes, counts) at a random place
        static constexpr uint32_t kInteresting[] = {0, 1, 0x7f, 0x80, 0xff, 0x7fff, 0xffff, 0x7fffffff,
                                                    0x80000000u, 0xffffffffu, 1u << 20, 1u << 30};
        if (b.size() >= 4) {
          const uint32_t v = kInteresting[rng() % std::size(kInteresting)];
          std::memcpy(b.data() + rng() % (b.size() - 3), &v, 4);
        }
        break;
      }
    }
  }
  return b;
}

}  // namespace

int main(int argc, char** argv) {
  long runs = 10000;
  unsigned long long seed = 1;
  std::vector<Bytes> seeds = GeopsFuzzSeeds();
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--write_seeds=", 14) == 0) {
      const std::filesystem::path dir(argv[i] + 14);
      std::filesystem::create_directories(dir);
      for (size_t n = 0; n < seeds.size(); ++n) {
        std::ofstream out(dir / ("seed-" + std::to_string(n)), std::ios::binary);
        out.write(reinterpret_cast<const char*>(seeds[n].data()), static_cast<std::streamsize>(seeds[n].size()));
      }
      std::printf("%zu seeds in %s\n", seeds.size(), dir.c_str());
      return 0;
    }
    if (std::strncmp(argv[i], "--runs=", 7) == 0) {
      runs = std::strtol(argv[i] + 7, nullptr, 10);
    } else if (std::strncmp(argv[i], "--seed=", 7) == 0) {
      seed = std::strtoull(argv[i] + 7, nullptr, 10);
    } else {
      Load(argv[i], &seeds);
    }
  }
  if (seeds.empty()) seeds.push_back(Bytes{0});
  for (const Bytes& s : seeds) LLVMFuzzerTestOneInput(s.data(), s.size());
  std::mt19937_64 rng(seed);
  for (long r = 0; r < runs; ++r) {
    const Bytes b = Mutate(seeds, rng);
    LLVMFuzzerTestOneInput(b.data(), b.size());
  }
  std::printf("%s: %zu seeds and %ld mutations, no crash\n", argv[0], seeds.size(), runs);
  return 0;
}
