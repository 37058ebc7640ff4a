// Throughput of the WAN hot path on one core: significance scan, batch
// encode and decode for each value codec, and the bytes each produces.
//
//   wan_bench [million_parameters=16] [chunk_floats=4096]
//
// Synthetic model: weights ~ N(0, 0.05); per-tick updates ~ N(0, 0.05 * u)
// with u chosen so that a few percent of the elements cross the 1%
// threshold. GB/s counts parameters (4 bytes each) covered per second of
// this thread's CPU time.
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "wan/codec.h"
#include "wan/significance_filter.h"

namespace geops::wan {
namespace {

// CPU time of this thread: on a shared machine, time spent descheduled does
// not count against the code under test.
double CpuNow() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

const char* CodecName(ValueCodec c) {
  switch (c) {
    case ValueCodec::kFp32:
      return "fp32";
    case ValueCodec::kFp16:
      return "fp16";
    case ValueCodec::kInt8:
      return "int8";
    case ValueCodec::kSign:
      return "sign";
  }
  return "?";
}

int Run(int64_t params, uint32_t chunk) {
  const uint32_t chunks = static_cast<uint32_t>((params + chunk - 1) / chunk);
  params = int64_t{chunks} * chunk;
  std::printf("wan_bench: %lld parameters (%.0f MiB), %u chunks of %u floats, one core\n",
              static_cast<long long>(params), params * 4.0 / (1 << 20), chunks, chunk);
  std::mt19937 rng(42);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> w(static_cast<size_t>(params));
  for (float& x : w) x = normal(rng) * 0.05f;
  ChunkValueLookup lookup = [&](ChunkKey k) { return w.data() + size_t{k.chunk} * chunk; };

  std::printf("\n%-34s %8s %10s\n", "significance scan (t = 1%)", "GB/s", "selected");
  for (double u : {0.00005, 0.0005, 0.002}) {
    SignificanceFilter f = std::move(SignificanceFilter::Create({})).value();
    std::vector<float> d(chunk);
    for (uint32_t c = 0; c < chunks; ++c) {
      for (float& x : d) x = normal(rng) * 0.05f * static_cast<float>(u);
      if (!f.Add({0, c}, d).ok()) return 1;
    }
    std::vector<SparseChunkUpdate> out;
    double t0 = CpuNow();
    SelectStats s = f.Select(0, lookup, 0.01f, &out);
    double sec = CpuNow() - t0;
    char label[64];
    std::snprintf(label, sizeof label, "  update/weight scale %.5f", u);
    std::printf("%-34s %8.2f %9.2f%%\n", label, params * 4.0 / sec / 1e9,
                100.0 * s.elements_selected / params);
  }

  // One realistic tick (~3% selected), then every codec over its output.
  SignificanceFilter f = std::move(SignificanceFilter::Create({})).value();
  std::vector<float> d(chunk);
  for (uint32_t c = 0; c < chunks; ++c) {
    for (float& x : d) x = normal(rng) * 0.05f * 0.0005f;
    if (!f.Add({0, c}, d).ok()) return 1;
  }
  std::vector<SparseChunkUpdate> sel;
  double t0 = CpuNow();
  SelectStats ss = f.Select(0, lookup, 0.01f, &sel);
  double scan_s = CpuNow() - t0;
  std::printf("\nbatch of one tick: %lld of %lld elements selected (%.2f%%)\n",
              static_cast<long long>(ss.elements_selected), static_cast<long long>(params),
              100.0 * ss.elements_selected / params);
  std::printf("%-6s %10s %10s %12s %10s %10s %12s\n", "codec", "enc GB/s", "dec GB/s",
              "scan+enc GB/s", "batch KiB", "x vs dense", "x vs sparse32");
  const double dense_bytes = params * 4.0;
  const double sparse_bytes = ss.elements_selected * 8.0;  // u32 index + f32 value
  for (ValueCodec codec :
       {ValueCodec::kFp32, ValueCodec::kFp16, ValueCodec::kInt8, ValueCodec::kSign}) {
    BatchEncoder enc;
    BatchDecoder dec;
    BatchHeader h;
    h.codec = codec;
    std::vector<uint8_t> bytes;
    std::vector<SparseChunkUpdate> residuals;
    double enc_s = 1e9, dec_s = 1e9;
    Result<EncodeStats> st = EncodeStats{};
    DecodedBatch out;
    for (int rep = 0; rep < 5; ++rep) {
      double e0 = CpuNow();
      st = enc.Encode(h, sel, &bytes, &residuals);
      enc_s = std::min(enc_s, CpuNow() - e0);
      if (!st.ok()) {
        std::printf("encode failed: %s\n", st.status().ToString().c_str());
        return 1;
      }
      double d0 = CpuNow();
      Status ds = dec.Decode(bytes, &out);
      dec_s = std::min(dec_s, CpuNow() - d0);
      if (!ds.ok()) {
        std::printf("decode failed: %s\n", ds.ToString().c_str());
        return 1;
      }
    }
    std::printf("%-6s %10.2f %10.2f %12.2f %10.1f %10.0f %12.2f\n", CodecName(codec),
                dense_bytes / enc_s / 1e9, dense_bytes / dec_s / 1e9,
                dense_bytes / (scan_s + enc_s) / 1e9, bytes.size() / 1024.0,
                dense_bytes / bytes.size(), sparse_bytes / bytes.size());
  }

  // Dense batches (threshold 0, as geo-BSP ships): codec cost per parameter.
  std::printf("\ndense batch (every element shipped)\n%-6s %10s %10s %10s\n", "codec", "enc GB/s",
              "dec GB/s", "x vs dense");
  std::vector<SparseChunkUpdate> dense(chunks);
  for (uint32_t c = 0; c < chunks; ++c) {
    dense[c].key = {0, c};
    dense[c].num_elements = chunk;
    dense[c].indices.resize(chunk);
    dense[c].values.resize(chunk);
    for (uint32_t i = 0; i < chunk; ++i) {
      dense[c].indices[i] = i;
      dense[c].values[i] = normal(rng) * 1e-4f;
    }
  }
  for (ValueCodec codec :
       {ValueCodec::kFp32, ValueCodec::kFp16, ValueCodec::kInt8, ValueCodec::kSign}) {
    BatchEncoder enc;
    BatchDecoder dec;
    BatchHeader h;
    h.codec = codec;
    std::vector<uint8_t> bytes;
    std::vector<SparseChunkUpdate> residuals;
    DecodedBatch out;
    double enc_s = 1e9, dec_s = 1e9;
    for (int rep = 0; rep < 3; ++rep) {
      double e0 = CpuNow();
      if (!enc.Encode(h, dense, &bytes, &residuals).ok()) return 1;
      enc_s = std::min(enc_s, CpuNow() - e0);
      double d0 = CpuNow();
      if (!dec.Decode(bytes, &out).ok()) return 1;
      dec_s = std::min(dec_s, CpuNow() - d0);
    }
    std::printf("%-6s %10.2f %10.2f %10.2f\n", CodecName(codec), dense_bytes / enc_s / 1e9,
                dense_bytes / dec_s / 1e9, dense_bytes / bytes.size());
  }
  return 0;
}

}  // namespace
}  // namespace geops::wan

int main(int argc, char** argv) {
  double mparams = argc > 1 ? std::atof(argv[1]) : 16;
  long chunk = argc > 2 ? std::atol(argv[2]) : 4096;
  if (mparams <= 0 || chunk <= 0) {
    std::fprintf(stderr, "usage: wan_bench [million_parameters] [chunk_floats]\n");
    return 2;
  }
  return geops::wan::Run(static_cast<int64_t>(mparams * 1e6), static_cast<uint32_t>(chunk));
}
