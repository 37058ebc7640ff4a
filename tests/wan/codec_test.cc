#include "wan/codec/codec.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <random>

#include "wan/codec/crc32c.h"
#include "wan/codec/quantize.h"
#include "wan/replication/significance_filter.h"
#include "wan/codec/sparse_index.h"

namespace geops::wan {
namespace {

constexpr ValueCodec kCodecs[] = {ValueCodec::kFp32, ValueCodec::kFp16, ValueCodec::kInt8,
                                  ValueCodec::kSign, ValueCodec::kInt4};

// A random sparse update: each element present with probability `density`,
// values of random sign and magnitudes spread over several decades.
SparseChunkUpdate RandomUpdate(std::mt19937& rng, ChunkKey key, uint32_t n, double density) {
  SparseChunkUpdate u;
  u.key = key;
  u.num_elements = n;
  std::uniform_real_distribution<double> unit(0, 1);
  for (uint32_t i = 0; i < n; ++i) {
    if (unit(rng) >= density) continue;
    u.indices.push_back(i);
    float mag = static_cast<float>(std::pow(10.0, -6 + 5 * unit(rng)));
    u.values.push_back(rng() % 2 ? mag : -mag);
  }
  return u;
}

struct RoundTrip {
  EncodeStats stats;
  std::vector<uint8_t> bytes;
  DecodedBatch decoded;
  std::vector<SparseChunkUpdate> residuals;
};

RoundTrip EncodeDecode(ValueCodec codec, const std::vector<SparseChunkUpdate>& in,
                       EncoderOptions eo = {}) {
  RoundTrip rt;
  BatchEncoder enc(eo);
  BatchHeader h;
  h.origin = 3;
  h.seq = 0x1122334455667788ull;
  h.clock = -7;
  h.codec = codec;
  Result<EncodeStats> s = enc.Encode(h, in, &rt.bytes, &rt.residuals);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  if (!s.ok()) return rt;
  rt.stats = *s;
  BatchDecoder dec;
  Status st = dec.Decode(rt.bytes, &rt.decoded);
  EXPECT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(rt.decoded.header.origin, 3);
  EXPECT_EQ(rt.decoded.header.seq, 0x1122334455667788ull);
  EXPECT_EQ(rt.decoded.header.clock, -7);
  EXPECT_EQ(rt.decoded.header.codec, codec);
  return rt;
}

// decoded + residual must reproduce every input value exactly; returns the
// per-element (value, decoded, residual) triples for further checks.
struct Triple {
  float v, d, r;
};
std::vector<Triple> CheckExactFeedback(const std::vector<SparseChunkUpdate>& in,
                                       const RoundTrip& rt) {
  std::map<std::pair<ChunkKey, uint32_t>, float> dec, res;
  for (const SparseChunkUpdate& u : rt.decoded.chunks) {
    for (size_t j = 0; j < u.indices.size(); ++j) {
      EXPECT_LT(u.indices[j], u.num_elements);
      EXPECT_TRUE(std::isfinite(u.values[j]));
      dec[{u.key, u.indices[j]}] = u.values[j];
    }
  }
  for (const SparseChunkUpdate& u : rt.residuals) {
    for (size_t j = 0; j < u.indices.size(); ++j) res[{u.key, u.indices[j]}] = u.values[j];
  }
  std::vector<Triple> out;
  size_t matched = 0;
  for (const SparseChunkUpdate& u : in) {
    for (size_t j = 0; j < u.indices.size(); ++j) {
      auto di = dec.find({u.key, u.indices[j]});
      auto ri = res.find({u.key, u.indices[j]});
      float d = di == dec.end() ? 0.0f : di->second;
      float r = ri == res.end() ? 0.0f : ri->second;
      matched += di != dec.end();
      EXPECT_EQ(d + r, u.values[j]) << "chunk " << u.key.chunk << " index " << u.indices[j];
      out.push_back({u.values[j], d, r});
    }
  }
  EXPECT_EQ(matched, dec.size()) << "decoded elements that were never sent";
  return out;
}

TEST(CodecTest, RoundTripsEveryValueCodecWithExactErrorFeedback) {
  for (ValueCodec codec : kCodecs) {
    for (uint32_t seed = 1; seed <= 20; ++seed) {
      std::mt19937 rng(seed);
      std::vector<SparseChunkUpdate> in;
      const double densities[] = {0.001, 0.01, 0.1, 0.5, 1.0};
      for (uint32_t c = 0; c < 12; ++c) {
        uint32_t n = 1 + rng() % 5000;
        SparseChunkUpdate u = RandomUpdate(rng, {c / 4, c}, n, densities[rng() % 5]);
        if (!u.indices.empty()) in.push_back(std::move(u));
      }
      RoundTrip rt = EncodeDecode(codec, in);
      std::vector<Triple> t = CheckExactFeedback(in, rt);
      ASSERT_FALSE(HasFailure()) << "codec " << int(codec) << " seed " << seed;
      if (codec == ValueCodec::kFp32) {
        for (const Triple& x : t) ASSERT_EQ(x.r, 0.0f);
        EXPECT_TRUE(rt.residuals.empty());
      }
      if (codec == ValueCodec::kFp16) {
        for (const Triple& x : t) {
          if (std::fabs(x.v) >= 6.2e-5f) {
            ASSERT_LE(std::fabs(x.r), std::fabs(x.v) * 4.9e-4f);
          }
        }
      }
    }
  }
}

// A batch for several streams is encoded once and sealed per stream: each
// sealed copy is byte for byte what Encode makes under that stream's header,
// and `shipped` is exactly what a receiver decodes, so the sender can keep
// it without decoding its own batch.
TEST(CodecTest, APreparedBodySealsPerStreamAndShippedIsWhatTheReceiverDecodes) {
  for (ValueCodec codec : kCodecs) {
    for (uint32_t seed = 1; seed <= 8; ++seed) {
      for (bool compress : {true, false}) {
        std::mt19937 rng(seed);
        std::vector<SparseChunkUpdate> in;
        const double densities[] = {0.001, 0.05, 0.5, 1.0};
        for (uint32_t c = 0; c < 10; ++c) {
          SparseChunkUpdate u = RandomUpdate(rng, {c / 3, 9 - c}, 1 + rng() % 4000, densities[rng() % 4]);
          if (!u.indices.empty()) in.push_back(std::move(u));
        }
        BatchEncoder enc(EncoderOptions{compress, 1});
        PreparedBody body;
        std::vector<SparseChunkUpdate> residuals, shipped;
        Result<EncodeStats> st = enc.EncodePrepared(codec, in, &body, &residuals, &shipped);
        ASSERT_TRUE(st.ok()) << st.status().ToString();
        for (uint64_t seq : {uint64_t{1}, uint64_t{77}}) {
          BatchHeader h;
          h.origin = 2;
          h.seq = seq;
          h.clock = 41;
          h.codec = codec;
          h.final = seq == 77;
          std::vector<uint8_t> sealed;
          SealPrepared(h, body, &sealed);
          EXPECT_EQ(static_cast<int64_t>(sealed.size()), st->batch_bytes);
          std::vector<uint8_t> direct;
          std::vector<SparseChunkUpdate> direct_residuals;
          ASSERT_TRUE(BatchEncoder(EncoderOptions{compress, 1}).Encode(h, in, &direct, &direct_residuals).ok());
          ASSERT_EQ(sealed, direct) << "codec " << int(codec) << " seed " << seed << " seq " << seq;
          DecodedBatch decoded;
          ASSERT_TRUE(BatchDecoder().Decode(sealed, &decoded).ok());
          EXPECT_EQ(decoded.header.seq, seq);
          EXPECT_EQ(decoded.header.final, seq == 77);
          ASSERT_EQ(decoded.chunks.size(), shipped.size());
          for (size_t i = 0; i < shipped.size(); ++i) {
            EXPECT_EQ(decoded.chunks[i].key, shipped[i].key);
            EXPECT_EQ(decoded.chunks[i].num_elements, shipped[i].num_elements);
            EXPECT_EQ(decoded.chunks[i].indices, shipped[i].indices);
            ASSERT_EQ(decoded.chunks[i].values.size(), shipped[i].values.size());
            EXPECT_EQ(std::memcmp(decoded.chunks[i].values.data(), shipped[i].values.data(),
                                  shipped[i].values.size() * sizeof(float)),
                      0)
                << "chunk " << i << ": not the same bits";
          }
          ASSERT_EQ(residuals.size(), direct_residuals.size());
        }
        ASSERT_FALSE(HasFailure()) << "codec " << int(codec) << " seed " << seed;
      }
    }
  }
}

TEST(CodecTest, Int8ErrorIsWithinHalfAScale) {
  std::mt19937 rng(11);
  for (int rep = 0; rep < 50; ++rep) {
    std::vector<SparseChunkUpdate> in = {RandomUpdate(rng, {0, 1}, 3000, 0.2)};
    float max_abs = 0;
    for (float v : in[0].values) max_abs = std::max(max_abs, std::fabs(v));
    const float scale = max_abs / 127.0f;
    RoundTrip rt = EncodeDecode(ValueCodec::kInt8, in);
    for (const Triple& x : CheckExactFeedback(in, rt)) {
      ASSERT_LE(std::fabs(x.r), scale * 0.5f * (1 + 1e-5f)) << x.v << " " << x.d;
      if (x.d != 0) {
        float q = x.d / scale;
        ASSERT_NEAR(q, std::nearbyint(q), 1e-3);
      }
    }
  }
}

TEST(CodecTest, SignCodecShipsSignsOfTheLargeValuesOnly) {
  std::vector<SparseChunkUpdate> in(1);
  in[0].key = {0, 0};
  in[0].num_elements = 8;
  in[0].indices = {0, 1, 2, 3, 4, 5};
  in[0].values = {1.0f, -1.2f, 0.9f, 0.01f, -0.02f, 3.0f};
  RoundTrip rt = EncodeDecode(ValueCodec::kSign, in);
  ASSERT_EQ(rt.decoded.chunks.size(), 1u);
  // mean |v| = 1.02; the scale is the mean of the values above half of that
  // (to 8 significant bits); values below half the scale stay behind.
  EXPECT_EQ(rt.decoded.chunks[0].indices, (std::vector<uint32_t>{0, 1, 2, 5}));
  const float scale = (1.0f + 1.2f + 0.9f + 3.0f) / 4;
  EXPECT_NEAR(rt.decoded.chunks[0].values[0], scale, scale / 256);
  EXPECT_EQ(rt.decoded.chunks[0].values[1], -rt.decoded.chunks[0].values[0]);
  EXPECT_EQ(rt.decoded.chunks[0].values[3], rt.decoded.chunks[0].values[0]);
  CheckExactFeedback(in, rt);
}

TEST(CodecTest, PicksTheSmallestIndexEncoding) {
  std::vector<SparseChunkUpdate> in(3);
  in[0].key = {0, 0};  // 3 of 4096: delta-varint
  in[0].num_elements = 4096;
  in[0].indices = {5, 900, 4095};
  in[0].values = {1, 2, 3};
  in[1].key = {0, 1};  // half of 4096: bitmap
  in[1].num_elements = 4096;
  for (uint32_t i = 0; i < 4096; i += 2) {
    in[1].indices.push_back(i);
    in[1].values.push_back(1.5f);
  }
  in[2].key = {0, 2};  // all present: no index at all
  in[2].num_elements = 10;
  for (uint32_t i = 0; i < 10; ++i) {
    in[2].indices.push_back(i);
    in[2].values.push_back(-2.0f);
  }
  RoundTrip rt = EncodeDecode(ValueCodec::kFp32, in, EncoderOptions{.compress = false});
  EXPECT_EQ(rt.stats.varint_chunks, 1);
  EXPECT_EQ(rt.stats.bitmap_chunks, 1);
  EXPECT_EQ(rt.stats.dense_chunks, 1);
  ASSERT_EQ(rt.decoded.chunks.size(), 3u);
  for (int c = 0; c < 3; ++c) {
    EXPECT_EQ(rt.decoded.chunks[c].indices, in[c].indices);
    EXPECT_EQ(rt.decoded.chunks[c].values, in[c].values);
  }
  // Body = 3 record heads + index bytes + 4 bytes per value. Heads:
  // (0, 0, 4096, 3, enc, 5) 1+1+2+1+1+1; (0, +1, 4096, 2048, enc, 512)
  // 1+1+2+2+1+2; (0, +1, 10, 10, enc, 0) 6 bytes.
  size_t index_bytes = DeltaVarintBytes(in[0].indices) + BitmapBytes(4096);
  EXPECT_EQ(DeltaVarintBytes(in[0].indices), 1u + 2u + 2u);
  EXPECT_EQ(rt.stats.body_bytes,
            static_cast<int64_t>(7 + 9 + 6 + index_bytes + 4 * (3 + 2048 + 10)));
}

// The encoding ChooseIndexEncoding picks is never larger than any other,
// earlier encodings win ties, and every encoding writes exactly its size.
TEST(CodecTest, ChooseIndexEncodingReturnsTheSmallest) {
  std::mt19937 rng(5);
  int used[kNumIndexEncodings] = {};
  for (int rep = 0; rep < 600; ++rep) {
    const uint32_t n = rep % 3 == 0 ? 1 + rng() % 64 : 1 + rng() % 20000;
    SparseChunkUpdate u = RandomUpdate(rng, {0, 0}, n, std::pow(10.0, -3.5 * (rep % 50) / 49.0));
    if (rep % 7 == 0 && !u.indices.empty()) {  // clustered: a dense run and a far outlier
      u.indices.resize(std::min<size_t>(u.indices.size(), 10));
      for (uint32_t& i : u.indices) i = static_cast<uint32_t>(&i - u.indices.data());
      if (n > 11) u.indices.push_back(n - 1);
    }
    const std::vector<uint32_t>& idx = u.indices;
    const IndexPlan plan = ChooseIndexEncoding(idx, n);
    ++used[static_cast<int>(plan.encoding)];
    size_t rice = 0;
    const uint32_t k = ChooseRiceParameter(idx, &rice);
    ASSERT_EQ(rice, RiceBytes(idx, k));
    const size_t sizes[] = {idx.size() == n ? 0 : SIZE_MAX, BitmapBytes(n), DeltaVarintBytes(idx),
                            rice};
    size_t best = 0;
    for (size_t e = 1; e < 4; ++e) {
      if (sizes[e] < sizes[best]) best = e;
    }
    ASSERT_EQ(static_cast<size_t>(plan.encoding), best) << "rep " << rep;
    ASSERT_EQ(plan.bytes, sizes[best]);
    if (plan.encoding == IndexEncoding::kRice) {
      ASSERT_EQ(plan.rice_k, k);
    }
    // The histogram estimate plus the exact walk finds the best k on all of
    // these sets, the clustered ones (where an escaped outlier makes the
    // cost non-convex in k) included.
    size_t global = SIZE_MAX;
    for (uint32_t kk = 0; kk <= batch_format::kRiceMaxParameter; ++kk) {
      global = std::min(global, RiceBytes(idx, kk));
    }
    ASSERT_EQ(rice, global) << "rep " << rep;
    // Every encoding (and every Rice k) round-trips and writes exactly its size.
    std::vector<IndexPlan> plans = {plan};
    if (idx.size() < n) {
      plans.push_back({IndexEncoding::kBitmap, BitmapBytes(n), 0});
      plans.push_back({IndexEncoding::kDeltaVarint, DeltaVarintBytes(idx), 0});
      const uint32_t kk = rng() % (batch_format::kRiceMaxParameter + 1);
      plans.push_back({IndexEncoding::kRice, RiceBytes(idx, kk), kk});
    }
    for (const IndexPlan& p : plans) {
      std::vector<uint8_t> buf(p.bytes + 1, 0xEE);
      EncodeIndex(p, idx, n, buf.data());
      EXPECT_EQ(buf[p.bytes], 0xEE);  // wrote exactly `bytes`
      std::vector<uint32_t> back(idx.size());
      Status s = DecodeIndex(p.encoding, std::span(buf.data(), p.bytes), n, back);
      ASSERT_TRUE(s.ok()) << s.ToString();
      ASSERT_EQ(back, idx);
    }
  }
  for (int e = 0; e < kNumIndexEncodings; ++e) EXPECT_GT(used[e], 0) << "encoding " << e;
  // A three-way tie (2 bytes each) goes to the bitmap.
  const std::vector<uint32_t> two = {0, 1};
  EXPECT_EQ(BitmapBytes(16), 2u);
  EXPECT_EQ(DeltaVarintBytes(two), 2u);
  EXPECT_EQ(RiceBytes(two, 0), 2u);
  EXPECT_EQ(ChooseIndexEncoding(two, 16).encoding, IndexEncoding::kBitmap);
  // Varint and Rice tied (values 128, 128: 2 + 2 bytes, and 1 + 18 bits
  // with k = 6), bitmap larger: varint.
  const std::vector<uint32_t> far = {128, 257};
  EXPECT_EQ(DeltaVarintBytes(far), 4u);
  size_t rb = 0;
  EXPECT_EQ(ChooseRiceParameter(far, &rb), 6u);
  EXPECT_EQ(rb, 4u);
  EXPECT_EQ(ChooseIndexEncoding(far, 4096).encoding, IndexEncoding::kDeltaVarint);
}

TEST(CodecTest, DeltaVarintHandlesLargeGapsAndRejectsOverflow) {
  std::vector<uint32_t> idx = {0, 127, 128, 16511, 0x7fffffffu, 0xfffffffeu};
  const uint32_t n = 0xffffffffu;
  size_t bytes = DeltaVarintBytes(idx);
  std::vector<uint8_t> buf(bytes);
  EncodeIndex({IndexEncoding::kDeltaVarint, bytes, 0}, idx, n, buf.data());
  std::vector<uint32_t> back(idx.size());
  ASSERT_TRUE(DecodeIndex(IndexEncoding::kDeltaVarint, buf, n, back).ok());
  EXPECT_EQ(back, idx);
  const uint8_t six[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
  std::vector<uint32_t> one(1);
  Status s = DecodeIndex(IndexEncoding::kDeltaVarint, six, n, one);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("overflows"), std::string::npos) << s.message();
  const uint8_t beyond[] = {10};
  s = DecodeIndex(IndexEncoding::kDeltaVarint, beyond, 10, one);
  EXPECT_NE(s.message().find(">= chunk size"), std::string::npos) << s.message();
}

uint32_t Bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

// `count` distinct random indices below n (sorted), drawn directly rather
// than by a pass over n, so that huge chunks stay cheap.
std::vector<uint32_t> RandomIndices(std::mt19937& rng, uint32_t n, uint32_t count) {
  std::vector<uint32_t> idx;
  if (uint64_t{count} * 4 >= n) {
    for (uint32_t i = 0; i < n; ++i) idx.push_back(i);
    std::shuffle(idx.begin(), idx.end(), rng);
    idx.resize(count);
  } else {
    std::uniform_int_distribution<uint32_t> any(0, n - 1);
    while (idx.size() < count) {
      idx.push_back(any(rng));
      std::sort(idx.begin(), idx.end());
      idx.erase(std::unique(idx.begin(), idx.end()), idx.end());
    }
  }
  std::sort(idx.begin(), idx.end());
  return idx;
}

// A value from one of several magnitude regimes: ordinary, tiny (down to
// subnormal), huge (up to FLT_MAX), exact small integers.
float WideValue(std::mt19937& rng, int regime) {
  std::uniform_real_distribution<double> unit(0, 1);
  double mag = 0;
  switch (regime) {
    case 0:
      mag = std::pow(10.0, -6 + 6 * unit(rng));
      break;
    case 1:
      mag = std::pow(10.0, -45 + 10 * unit(rng));  // subnormal to 1e-35
      break;
    case 2:
      mag = std::pow(10.0, 30 + 8.5 * unit(rng));  // up to ~3.2e38
      break;
    case 3:
      mag = static_cast<double>(1 + rng() % 7);
      break;
    default:
      mag = std::numeric_limits<float>::max() * unit(rng);
      break;
  }
  const float f = static_cast<float>(mag);
  return rng() % 2 ? f : -f;
}

// The int4 quantiser straight: for every candidate, decoded + residual is
// the input bit for bit; kept-back values keep their whole value; codes are
// in [-7, 7] and non-zero; the packing is the documented one.
TEST(CodecTest, Int4ResidualReproducesEveryInputBitForBit) {
  std::mt19937 rng(23);
  int64_t shipped_total = 0, kept_total = 0;
  for (int rep = 0; rep < 3000; ++rep) {
    const uint32_t m = 1 + rng() % (rep % 10 == 0 ? 3000 : 40);
    const int regimes = 1 + rng() % 3;  // mix up to three regimes in one chunk
    int regime[3];
    for (int& r : regime) r = static_cast<int>(rng() % 5);
    std::vector<float> v(m);
    for (float& x : v) x = WideValue(rng, regime[rng() % regimes]);
    if (rep % 17 == 0) v[rng() % m] = 0.0f;
    std::vector<uint32_t> kept(m);
    std::vector<uint8_t> codes(m, 0xAB);
    std::vector<float> res(m);
    QuantizeOutput q = QuantizeInt4(v.data(), m, kept.data(), codes.data(), res.data());
    std::vector<float> d(q.shipped);
    if (q.shipped > 0) {
      ASSERT_TRUE(q.scale > 0 && std::isfinite(q.scale));
      ASSERT_EQ(DecodeInt4(codes.data(), q.shipped, q.scale, d.data()), -1);
      if (q.shipped % 2 != 0) {
        ASSERT_EQ(codes[q.shipped / 2] >> 4, 0) << "stray high nibble";
      }
    }
    uint32_t s = 0;
    for (uint32_t j = 0; j < m; ++j) {
      if (s < q.shipped && kept[s] == j) {
        const int nib = (codes[s / 2] >> (4 * (s % 2))) & 0xf;
        const int code = nib < 8 ? nib : nib - 16;
        ASSERT_NE(code, 0);
        ASSERT_GE(code, -7);
        ASSERT_EQ(d[s], static_cast<float>(code) * q.scale);
        ASSERT_EQ(Bits(d[s] + res[j]), Bits(v[j])) << v[j] << " " << d[s] << " " << res[j];
        if (q.scale >= 1e-30f && q.scale < 1e37f) {
          ASSERT_LE(std::fabs(res[j]), q.scale * 0.5f * (1 + 1e-5f)) << v[j];
        }
        ++s;
        ++shipped_total;
      } else {
        ASSERT_EQ(Bits(res[j]), Bits(v[j]));  // kept back whole
        ++kept_total;
      }
    }
    ASSERT_EQ(s, q.shipped);
  }
  EXPECT_GT(shipped_total, 10000);
  EXPECT_GT(kept_total, 1000);
}

// The nibble layout on the wire: (7, -7, 1) with scale 1 is 0x97 0x01.
TEST(CodecTest, Int4PacksTwoCodesPerByteLowNibbleFirst) {
  std::vector<SparseChunkUpdate> in(1);
  in[0].key = {2, 5};
  in[0].num_elements = 3;
  in[0].indices = {0, 1, 2};
  in[0].values = {7.0f, -7.0f, 1.0f};
  RoundTrip rt = EncodeDecode(ValueCodec::kInt4, in, EncoderOptions{.compress = false});
  const std::vector<uint8_t> body(rt.bytes.begin() + batch_format::kHeaderSize, rt.bytes.end());
  // table 2, chunk 5, 3 elements, 3 values, dense, 0 index bytes, f32 1.0.
  const std::vector<uint8_t> want = {2, 5, 3, 3, 0, 0, 0x00, 0x00, 0x80, 0x3f, 0x97, 0x01};
  EXPECT_EQ(body, want);
  ASSERT_EQ(rt.decoded.chunks.size(), 1u);
  EXPECT_EQ(rt.decoded.chunks[0].values, in[0].values);
  EXPECT_TRUE(rt.residuals.empty());
}

// int4 values and Rice indices through the whole codec at many shapes:
// single elements, sizes not a multiple of 8, the main job's 1.6% of 4096,
// and huge chunks with gaps beyond 2^20.
TEST(CodecTest, Int4AndRiceRoundTripAtManyShapes) {
  struct Shape {
    uint32_t n, count;
  };
  const Shape shapes[] = {{1, 1},       {7, 3},           {9, 1},          {13, 13},
                          {4095, 65},   {4096, 65},       {4096, 2},       {4097, 400},
                          {100003, 97}, {1u << 24, 40},   {1u << 26, 12},  {70000, 69999}};
  std::mt19937 rng(77);
  int64_t rice = 0;
  for (ValueCodec codec : {ValueCodec::kInt4, ValueCodec::kFp32}) {
    for (int rep = 0; rep < 4; ++rep) {
      std::vector<SparseChunkUpdate> in;
      uint32_t c = 0;
      for (const Shape& sh : shapes) {
        SparseChunkUpdate u;
        u.key = {c % 3, c};
        ++c;
        u.num_elements = sh.n;
        u.indices = RandomIndices(rng, sh.n, sh.count);
        std::normal_distribution<float> normal(0.0f, 1e-3f);
        for (size_t j = 0; j < u.indices.size(); ++j) {
          u.values.push_back(rep == 3 ? WideValue(rng, static_cast<int>(rng() % 5)) : normal(rng));
        }
        in.push_back(std::move(u));
      }
      // Gaps of 2^20 and more, and the very last element of the largest chunk.
      SparseChunkUpdate far;
      far.key = {9, 0};
      far.num_elements = 1u << 26;
      far.indices = {0, 1u << 20, 3u << 20, (3u << 20) + 1, (1u << 26) - 1};
      far.values = {1.0f, -2.0f, 3.0f, -4.0f, 5.0f};
      in.push_back(far);
      RoundTrip rt = EncodeDecode(codec, in, EncoderOptions{.compress = rep % 2 == 0});
      CheckExactFeedback(in, rt);
      ASSERT_FALSE(HasFailure()) << "codec " << int(codec) << " rep " << rep;
      rice += rt.stats.rice_chunks;
      // Indices of what was shipped come back exactly (fp32 ships all).
      if (codec == ValueCodec::kFp32) {
        ASSERT_EQ(rt.decoded.chunks.size(), in.size());
        std::sort(in.begin(), in.end(),
                  [](const SparseChunkUpdate& a, const SparseChunkUpdate& b) { return a.key < b.key; });
        for (size_t i = 0; i < in.size(); ++i) {
          ASSERT_EQ(rt.decoded.chunks[i].indices, in[i].indices) << i;
          ASSERT_EQ(rt.decoded.chunks[i].values, in[i].values) << i;
        }
      }
    }
  }
  EXPECT_GT(rice, 20);
}

TEST(CodecTest, RiceRoundTripsEveryParameterIncludingEscapes) {
  std::mt19937 rng(8);
  for (uint32_t n : {1u, 8u, 9u, 63u, 4096u, 1000003u, 0xffffffffu}) {
    for (int rep = 0; rep < 6; ++rep) {
      const uint32_t count =
          n < 64 ? 1 + rng() % n : 1 + rng() % std::min<uint32_t>(500, n / (1 + rep * 20));
      std::vector<uint32_t> idx = RandomIndices(rng, n, count);
      for (uint32_t k = 0; k <= batch_format::kRiceMaxParameter; ++k) {
        const size_t bytes = RiceBytes(idx, k);
        std::vector<uint8_t> buf(bytes + 1, 0xEE);
        EncodeIndex({IndexEncoding::kRice, bytes, k}, idx, n, buf.data());
        ASSERT_EQ(buf[0], k);
        ASSERT_EQ(buf[bytes], 0xEE);
        std::vector<uint32_t> back(idx.size());
        Status s = DecodeIndex(IndexEncoding::kRice, std::span(buf.data(), bytes), n, back);
        ASSERT_TRUE(s.ok()) << "n " << n << " k " << k << ": " << s.ToString();
        ASSERT_EQ(back, idx) << "n " << n << " k " << k;
      }
    }
  }
  // The largest gaps a u32 allows, escaped at small k and coded at k = 31.
  const std::vector<uint32_t> edge = {0xfffffffdu, 0xfffffffeu};
  for (uint32_t k : {0u, 5u, 26u, 27u, 31u}) {
    std::vector<uint8_t> buf(RiceBytes(edge, k));
    EncodeIndex({IndexEncoding::kRice, buf.size(), k}, edge, 0xffffffffu, buf.data());
    std::vector<uint32_t> back(2);
    ASSERT_TRUE(DecodeIndex(IndexEncoding::kRice, buf, 0xffffffffu, back).ok()) << k;
    EXPECT_EQ(back, edge);
  }
  EXPECT_EQ(RiceBytes(edge, 0), 1u + 9u);  // escape (64 bits) + one 0 bit
}

// The worked example of docs/wan_batch_format.md.
TEST(CodecTest, RiceBitLayoutMatchesTheFormatPage) {
  const std::vector<uint32_t> idx = {5, 6, 20};
  ASSERT_EQ(RiceBytes(idx, 2), 3u);
  std::vector<uint8_t> buf(3);
  EncodeIndex({IndexEncoding::kRice, 3, 2}, idx, 32, buf.data());
  EXPECT_EQ(buf, (std::vector<uint8_t>{0x02, 0x85, 0x0b}));
  // An escape: k = 0, value 40 = 32 ones, then 40 in 32 bits, then the
  // next value 0 as a single 0 bit.
  const std::vector<uint32_t> esc = {40, 41};
  ASSERT_EQ(RiceBytes(esc, 0), 1u + 9u);
  buf.resize(10);
  EncodeIndex({IndexEncoding::kRice, 10, 0}, esc, 100, buf.data());
  EXPECT_EQ(buf, (std::vector<uint8_t>{0, 0xff, 0xff, 0xff, 0xff, 40, 0, 0, 0, 0}));
}

TEST(CodecTest, RiceDecoderRefusesHostileStreams) {
  auto expect = [](std::vector<uint8_t> in, uint32_t n, size_t count, const char* what) {
    std::vector<uint32_t> out(count);
    Status s = DecodeIndex(IndexEncoding::kRice, in, n, out);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << what;
    EXPECT_NE(s.message().find("rice index"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find(what), std::string::npos) << s.message();
  };
  // Good: k = 0, value 3 = 1110 (LSB first) = 0x07.
  std::vector<uint32_t> one(1);
  ASSERT_TRUE(DecodeIndex(IndexEncoding::kRice, std::vector<uint8_t>{0, 0x07}, 10, one).ok());
  EXPECT_EQ(one[0], 3u);
  expect({}, 10, 1, "parameter byte");
  expect({32, 0x00}, 10, 1, "parameter k 32");
  expect({0, 0x87}, 10, 1, "padding");                   // bit 7 set after the code
  expect({0, 0x07, 0x00}, 10, 1, "trailing bytes");
  expect({0, 0x07}, 3, 1, ">= chunk size");
  expect({0, 0xff, 0xff, 0xff}, 1000, 1, "unterminated");  // 24 ones, then the end
  expect({3, 0x07}, 100, 2, "unterminated");  // k = 3: the second value needs 4 bits, 1 is left
  // A run of 32 ones is the escape: 32 raw bits follow. Escaping a value
  // that fits the unary code (5 with k = 0) is overlong.
  expect({0, 0xff, 0xff, 0xff, 0xff, 5, 0, 0, 0}, 1000, 1, "overlong");
  expect({0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, 1000, 1, "unterminated");  // escape cut short
  expect({0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, 1000, 1, ">= chunk size");
  // k = 31, quotient 2: 2 << 31 does not fit 32 bits.
  expect({31, 0x03, 0, 0, 0, 0}, 0xffffffffu, 1, "overflows 32 bits");
  // However long a run of ones, it is an escape after 32: a field of 0xff
  // bytes is refused at its first value, not scanned.
  std::vector<uint8_t> ones(1 << 20, 0xff);
  ones[0] = 0;
  expect(ones, 0xffffffffu, 1000, ">= chunk size");
  ones[0] = 31;  // with k = 31 the same escape would fit the unary code
  expect(ones, 0xffffffffu, 1000, "overlong");
}

TEST(CodecTest, Fp16ConversionRoundsToNearestEven) {
  EXPECT_EQ(FloatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(FloatToHalf(-2.0f), 0xc000);
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7bff);
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7c00);  // rounds to Inf
  EXPECT_EQ(FloatToHalf(0x1p-24f), 0x0001);  // smallest subnormal
  EXPECT_EQ(FloatToHalf(0x1p-26f), 0x0000);
  EXPECT_EQ(FloatToHalf(1.0f + 0x1p-11f), 0x3c00);  // tie to even
  EXPECT_EQ(FloatToHalf(1.0f + 3 * 0x1p-11f), 0x3c02);
  for (uint32_t h = 0; h < 0x7c00; ++h) {
    ASSERT_EQ(FloatToHalf(HalfToFloat(static_cast<uint16_t>(h))), h);
    ASSERT_EQ(FloatToHalf(-HalfToFloat(static_cast<uint16_t>(h))), h | 0x8000);
  }
}

TEST(CodecTest, HandlesValuesBeyondHalfRangeWithFeedback) {
  std::vector<SparseChunkUpdate> in(1);
  in[0].key = {0, 0};
  in[0].num_elements = 4;
  in[0].indices = {0, 1, 2, 3};
  in[0].values = {1e6f, -7e4f, 1e-9f, 3.0f};
  RoundTrip rt = EncodeDecode(ValueCodec::kFp16, in);
  CheckExactFeedback(in, rt);
  ASSERT_EQ(rt.decoded.chunks.size(), 1u);
  EXPECT_EQ(rt.decoded.chunks[0].values[0], 65504.0f);
  EXPECT_EQ(rt.decoded.chunks[0].indices, (std::vector<uint32_t>{0, 1, 3}));  // 1e-9 underflows
}

TEST(CodecTest, SortsChunksAndRejectsBadInput) {
  std::vector<SparseChunkUpdate> in(2);
  in[0].key = {1, 0};
  in[0].num_elements = 4;
  in[0].indices = {1};
  in[0].values = {1};
  in[1].key = {0, 9};
  in[1].num_elements = 4;
  in[1].indices = {2};
  in[1].values = {2};
  RoundTrip rt = EncodeDecode(ValueCodec::kFp32, in);
  ASSERT_EQ(rt.decoded.chunks.size(), 2u);
  EXPECT_EQ(rt.decoded.chunks[0].key, (ChunkKey{0, 9}));

  BatchEncoder enc;
  std::vector<uint8_t> out = {42};
  auto expect_bad = [&](std::vector<SparseChunkUpdate> bad, const char* what) {
    Result<EncodeStats> s = enc.Encode(BatchHeader{}, bad, &out, nullptr);
    EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument) << what;
    EXPECT_NE(s.status().message().find(what), std::string::npos) << s.status().message();
    EXPECT_EQ(out, std::vector<uint8_t>{42});
  };
  std::vector<SparseChunkUpdate> dup = {in[0], in[0]};
  expect_bad(dup, "twice");
  std::vector<SparseChunkUpdate> nan = {in[0]};
  nan[0].values[0] = NAN;
  expect_bad(nan, "not finite");
  std::vector<SparseChunkUpdate> order = {in[0]};
  order[0].indices = {2, 1};
  order[0].values = {1, 1};
  expect_bad(order, "out of order");
  std::vector<SparseChunkUpdate> range = {in[0]};
  range[0].indices = {4};
  expect_bad(range, ">= num_elements");
  std::vector<SparseChunkUpdate> sizes = {in[0]};
  sizes[0].values = {1, 2};
  expect_bad(sizes, "indices but");
}

TEST(CodecTest, CompressesRepetitiveBodiesAndStoresOthersRaw) {
  std::vector<SparseChunkUpdate> in(1);
  in[0].key = {0, 0};
  in[0].num_elements = 100000;
  for (uint32_t i = 0; i < 100000; i += 3) {
    in[0].indices.push_back(i);
    in[0].values.push_back(0.5f);
  }
  RoundTrip rt = EncodeDecode(ValueCodec::kFp32, in);
  EXPECT_LT(rt.stats.batch_bytes * 20, rt.stats.body_bytes);
  EXPECT_EQ(rt.decoded.chunks[0].values, in[0].values);
  EXPECT_EQ(rt.bytes[batch_format::kFlagsOffset], batch_format::kFlagLz4);
  std::mt19937 rng(1);
  std::vector<SparseChunkUpdate> noisy = {RandomUpdate(rng, {0, 0}, 2000, 1.0)};
  RoundTrip raw = EncodeDecode(ValueCodec::kFp32, noisy);
  EXPECT_EQ(raw.stats.batch_bytes,
            raw.stats.body_bytes + static_cast<int64_t>(batch_format::kHeaderSize));
  EXPECT_EQ(raw.bytes[batch_format::kFlagsOffset], 0);
}

TEST(CodecTest, EmptyBatchRoundTrips) {
  RoundTrip rt = EncodeDecode(ValueCodec::kInt8, {});
  EXPECT_EQ(rt.bytes.size(), batch_format::kHeaderSize);
  EXPECT_TRUE(rt.decoded.chunks.empty());
  Result<BatchHeader> h = PeekBatchHeader(rt.bytes);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->seq, 0x1122334455667788ull);
}

TEST(CodecTest, Crc32cMatchesTheStandardCheckValue) {
  const char* s = "123456789";
  EXPECT_EQ(Crc32c(reinterpret_cast<const uint8_t*>(s), 9), 0xE3069283u);
  EXPECT_EQ(Crc32cExtendPortable(0, reinterpret_cast<const uint8_t*>(s), 9), 0xE3069283u);
  std::vector<uint8_t> noise(1000);
  std::mt19937 rng(4);
  for (uint8_t& b : noise) b = static_cast<uint8_t>(rng());
  for (size_t len : {0u, 1u, 7u, 8u, 9u, 100u, 1000u}) {
    EXPECT_EQ(Crc32c(noise.data(), len), Crc32cExtendPortable(0, noise.data(), len)) << len;
  }
  EXPECT_EQ(Crc32cExtend(Crc32c(reinterpret_cast<const uint8_t*>(s), 4),
                         reinterpret_cast<const uint8_t*>(s) + 4, 5),
            0xE3069283u);
}

}  // namespace
}  // namespace geops::wan

namespace geops::wan {
namespace {

// Filter -> encode with error feedback -> residuals back into the filter,
// over many ticks: what the receiver decodes plus what the sender still
// holds equals what was pushed, up to float rounding of the accumulator.
TEST(CodecTest, ErrorFeedbackThroughTheFilterLosesNothing) {
  for (ValueCodec codec : kCodecs) {
    SignificanceFilter f = std::move(SignificanceFilter::Create({})).value();
    BatchEncoder enc;
    BatchDecoder dec;
    std::mt19937 rng(17);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    const uint32_t kN = 1000;
    std::vector<float> w(kN);
    for (float& x : w) x = normal(rng) * 0.05f;
    std::vector<std::vector<double>> pushed(4, std::vector<double>(kN, 0.0));
    std::vector<std::vector<double>> received(4, std::vector<double>(kN, 0.0));
    std::vector<SparseChunkUpdate> sel, residuals;
    std::vector<uint8_t> bytes;
    DecodedBatch out;
    auto ship = [&](const std::vector<SparseChunkUpdate>& updates, ValueCodec c) {
      BatchHeader h;
      h.codec = c;
      ASSERT_TRUE(enc.Encode(h, updates, &bytes, &residuals).ok());
      ASSERT_TRUE(dec.Decode(bytes, &out).ok());
      for (const SparseChunkUpdate& u : out.chunks) {
        for (size_t j = 0; j < u.indices.size(); ++j)
          received[u.key.chunk][u.indices[j]] += u.values[j];
      }
      for (const SparseChunkUpdate& r : residuals) ASSERT_TRUE(f.AddSparse(r).ok());
    };
    for (Clock k = 0; k < 100; ++k) {
      for (uint32_t c = 0; c < 4; ++c) {
        std::vector<float> d(kN);
        for (uint32_t i = 0; i < kN; ++i) {
          d[i] = normal(rng) * 1e-4f;
          pushed[c][i] += d[i];
        }
        ASSERT_TRUE(f.Add({0, c}, d).ok());
      }
      f.Select(
          k, [&](ChunkKey) { return w.data(); }, 0.01f, &sel);
      ship(sel, codec);
    }
    // Drain losslessly at the end: everything pushed has arrived.
    f.DrainAll(&sel);
    ship(sel, ValueCodec::kFp32);
    EXPECT_TRUE(residuals.empty());
    double worst = 0;
    for (uint32_t c = 0; c < 4; ++c) {
      for (uint32_t i = 0; i < kN; ++i) {
        worst = std::max(worst, std::fabs(received[c][i] - pushed[c][i]));
      }
    }
    EXPECT_LT(worst, 1e-8) << "codec " << static_cast<int>(codec);
  }
}

}  // namespace
}  // namespace geops::wan
