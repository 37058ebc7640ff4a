// Throughput of the WAN hot path on one core: significance scan, batch
// encode and decode for each value codec, and the bytes each produces; last,
// the main job's sparse shape (1.6% of each chunk) in bytes per shipped
// element, version 1 int8 against version 2 int8 and int4.
//
//   wan_bench [million_parameters=16] [chunk_floats=4096]
//
// Synthetic model: weights ~ N(0, 0.05); per-tick updates ~ N(0, 0.05 * u)
// with u chosen so that a few percent of the elements cross the 1%
// threshold. GB/s counts parameters (4 bytes each) covered per second of
// this thread's CPU time.
#include <lz4.h>
#include <time.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "wan/codec/codec.h"
#include "wan/replication/significance_filter.h"
#include "wan/codec/sparse_index.h"

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
    case ValueCodec::kInt4:
      return "int4";
  }
  return "?";
}

// The same records as a version 1 batch would carry them, built byte for
// byte: a fixed 21-byte head (u32 table, chunk, num_elements, count, u8
// encoding, u32 index_bytes), the f32 scale, the smaller of bitmap and
// delta-varint (nothing when dense), one int8 code per value. Returns the
// batch size with the envelope's LZ4 rule (kept raw unless LZ4 shrinks it)
// and sets *raw_body to the body size and *index_bytes to the index total.
int64_t Version1Int8Bytes(const DecodedBatch& b, int64_t* raw_body, int64_t* index_bytes) {
  std::vector<uint8_t> body;
  auto put = [&body](const void* p, size_t n) {
    const uint8_t* c = static_cast<const uint8_t*>(p);
    body.insert(body.end(), c, c + n);
  };
  *index_bytes = 0;
  for (const SparseChunkUpdate& u : b.chunks) {
    float max_abs = 0;
    for (float v : u.values) max_abs = std::max(max_abs, std::fabs(v));
    const float scale = max_abs / 127.0f;  // the largest value decodes as +-127 * scale
    IndexPlan plan;
    if (u.indices.size() < u.num_elements) {
      const size_t bitmap = BitmapBytes(u.num_elements);
      const size_t varint = DeltaVarintBytes(u.indices);
      plan = varint < bitmap ? IndexPlan{IndexEncoding::kDeltaVarint, varint, 0}
                             : IndexPlan{IndexEncoding::kBitmap, bitmap, 0};
    }
    const uint32_t count = static_cast<uint32_t>(u.indices.size());
    const uint32_t ib = static_cast<uint32_t>(plan.bytes);
    const uint8_t enc = static_cast<uint8_t>(plan.encoding);
    put(&u.key.table, 4);
    put(&u.key.chunk, 4);
    put(&u.num_elements, 4);
    put(&count, 4);
    put(&enc, 1);
    put(&ib, 4);
    put(&scale, 4);
    const size_t at = body.size();
    body.resize(at + plan.bytes);
    EncodeIndex(plan, u.indices, u.num_elements, body.data() + at);
    for (float v : u.values) body.push_back(static_cast<uint8_t>(std::lround(v / scale)));
    *index_bytes += static_cast<int64_t>(plan.bytes);
  }
  *raw_body = static_cast<int64_t>(body.size());
  std::vector<char> lz(static_cast<size_t>(LZ4_compressBound(static_cast<int>(body.size()))));
  const int n = LZ4_compress_default(reinterpret_cast<const char*>(body.data()), lz.data(),
                                     static_cast<int>(body.size()), static_cast<int>(lz.size()));
  const int64_t stored = n > 0 && n < *raw_body ? n : *raw_body;
  return static_cast<int64_t>(batch_format::kHeaderSize) + stored;
}

// Index decoding alone, delta-varint against Rice, over the same index sets:
// million indices per CPU second.
void IndexDecodeSpeed(const std::vector<SparseChunkUpdate>& chunks) {
  std::vector<std::vector<uint8_t>> varint(chunks.size()), rice(chunks.size());
  int64_t total = 0, varint_b = 0, rice_b = 0;
  for (size_t c = 0; c < chunks.size(); ++c) {
    const SparseChunkUpdate& u = chunks[c];
    const IndexPlan v{IndexEncoding::kDeltaVarint, DeltaVarintBytes(u.indices), 0};
    IndexPlan r{IndexEncoding::kRice, 0, 0};
    r.rice_k = ChooseRiceParameter(u.indices, &r.bytes);
    varint[c].resize(v.bytes);
    rice[c].resize(r.bytes);
    EncodeIndex(v, u.indices, u.num_elements, varint[c].data());
    EncodeIndex(r, u.indices, u.num_elements, rice[c].data());
    total += static_cast<int64_t>(u.indices.size());
    varint_b += static_cast<int64_t>(v.bytes);
    rice_b += static_cast<int64_t>(r.bytes);
  }
  std::vector<uint32_t> out;
  for (IndexEncoding e : {IndexEncoding::kDeltaVarint, IndexEncoding::kRice}) {
    const auto& fields = e == IndexEncoding::kRice ? rice : varint;
    double best = 1e9;
    for (int rep = 0; rep < 5; ++rep) {
      const double t0 = CpuNow();
      for (size_t c = 0; c < chunks.size(); ++c) {
        out.resize(chunks[c].indices.size());
        if (!DecodeIndex(e, fields[c], chunks[c].num_elements, out).ok()) std::abort();
      }
      best = std::min(best, CpuNow() - t0);
    }
    std::printf("  %-13s %6.3f B/index  decode %7.1f M indices/s\n",
                e == IndexEncoding::kRice ? "rice" : "delta-varint",
                static_cast<double>(e == IndexEncoding::kRice ? rice_b : varint_b) / total,
                total / best / 1e6);
  }
}

// The main job's shape: each element present with probability `density`
// at random positions, gaussian values. Compares version 1 int8 (computed
// from the int8 records), version 2 int8 and version 2 int4 (encoded), in
// bytes per shipped element and in throughput.
int RunSparseCase(uint32_t chunks, uint32_t chunk, double density) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1e-4f);
  std::bernoulli_distribution present(density);
  std::vector<SparseChunkUpdate> in(chunks);
  int64_t candidates = 0;
  double in_sq = 0;
  for (uint32_t c = 0; c < chunks; ++c) {
    in[c].key = {0, c};
    in[c].num_elements = chunk;
    for (uint32_t i = 0; i < chunk; ++i) {
      if (!present(rng)) continue;
      in[c].indices.push_back(i);
      in[c].values.push_back(normal(rng));
      in_sq += double{in[c].values.back()} * in[c].values.back();
    }
    candidates += static_cast<int64_t>(in[c].indices.size());
  }
  std::printf("\nsparse update: %u chunks of %u floats, %.2f%% present at random "
              "(%.1f per chunk), N(0, 1e-4) values, LZ4 on\n",
              chunks, chunk, 100.0 * density, static_cast<double>(candidates) / chunks);
  std::printf("%-14s %9s %9s %8s %8s %8s %8s %9s %9s %9s %9s %7s\n", "format", "shipped", "batch KiB",
              "B/elem", "value", "index", "head", "B/cand", "enc Me/s", "dec Me/s", "enc GB/s",
              "resid");
  const double dense_bytes = static_cast<double>(chunks) * chunk * 4.0;
  for (ValueCodec codec : {ValueCodec::kInt8, ValueCodec::kInt4}) {
    BatchEncoder enc;
    BatchDecoder dec;
    BatchHeader h;
    h.codec = codec;
    std::vector<uint8_t> bytes;
    std::vector<SparseChunkUpdate> residuals;
    DecodedBatch out;
    Result<EncodeStats> st = EncodeStats{};
    double enc_s = 1e9, dec_s = 1e9;
    for (int rep = 0; rep < 5; ++rep) {
      double e0 = CpuNow();
      st = enc.Encode(h, in, &bytes, &residuals);
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
    // Where the body bytes go: values, index fields (recomputed the way the
    // encoder chooses them), and the rest (record heads and scales).
    int64_t value_b = 0, index_b = 0;
    for (const SparseChunkUpdate& u : out.chunks) {
      value_b += static_cast<int64_t>(batch_format::ValueBytes(codec, u.indices.size()));
      index_b += static_cast<int64_t>(ChooseIndexEncoding(u.indices, u.num_elements).bytes);
    }
    const int64_t head_b = st->body_bytes - value_b - index_b;
    double res_sq = 0;
    for (const SparseChunkUpdate& r : residuals) {
      for (float x : r.values) res_sq += double{x} * x;
    }
    const double shipped = static_cast<double>(st->elements_out);
    char label[32];
    std::snprintf(label, sizeof label, "v2 %s", CodecName(codec));
    std::printf("%-14s %9lld %9.1f %8.3f %8.3f %8.3f %8.3f %9.3f %9.1f %9.1f %9.2f %7.3f\n",
                label, static_cast<long long>(st->elements_out), bytes.size() / 1024.0,
                bytes.size() / shipped, value_b / shipped, index_b / shipped, head_b / shipped,
                bytes.size() / static_cast<double>(candidates), shipped / enc_s / 1e6,
                shipped / dec_s / 1e6, dense_bytes / enc_s / 1e9, std::sqrt(res_sq / in_sq));
    std::printf("%-14s index records: %lld dense, %lld bitmap, %lld varint, %lld rice; body %lld B, "
                "batch %zu B\n",
                "", static_cast<long long>(st->dense_chunks),
                static_cast<long long>(st->bitmap_chunks),
                static_cast<long long>(st->varint_chunks), static_cast<long long>(st->rice_chunks),
                static_cast<long long>(st->body_bytes), bytes.size());
    if (codec == ValueCodec::kInt8) {
      // Version 1 shipped exactly the same int8 elements.
      int64_t v1_body = 0, v1_index = 0;
      const int64_t v1 = Version1Int8Bytes(out, &v1_body, &v1_index);
      const int64_t v1_head = v1_body - value_b - v1_index;
      std::printf("%-14s %9lld %9.1f %8.3f %8.3f %8.3f %8.3f %9.3f %9s %9s %9s %7.3f\n",
                  "v1 int8", static_cast<long long>(st->elements_out), v1 / 1024.0,
                  v1 / shipped, value_b / shipped, v1_index / shipped, v1_head / shipped,
                  v1 / static_cast<double>(candidates), "-", "-", "-", std::sqrt(res_sq / in_sq));
      std::printf("%-14s (rebuilt from the int8 records in the version 1 layout: body %lld B, "
                  "batch %lld B)\n",
                  "", static_cast<long long>(v1_body), static_cast<long long>(v1));
    }
  }
  std::printf("B/elem: batch bytes per shipped element (value/index/head: body parts, the 48-byte\n"
              "batch header left out); B/cand: per element offered; Me/s: million shipped\n"
              "elements per CPU second; resid: |residual| / |input| (L2), the part deferred to\n"
              "later ticks by error feedback.\n");
  std::printf("\nindex decoding alone, the candidates' index sets\n");
  IndexDecodeSpeed(in);
  return 0;
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
       {ValueCodec::kFp32, ValueCodec::kFp16, ValueCodec::kInt8, ValueCodec::kInt4,
        ValueCodec::kSign}) {
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
       {ValueCodec::kFp32, ValueCodec::kFp16, ValueCodec::kInt8, ValueCodec::kInt4,
        ValueCodec::kSign}) {
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
  return RunSparseCase(chunks, chunk, 0.016);
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
