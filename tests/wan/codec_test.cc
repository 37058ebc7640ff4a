#include "wan/codec.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <random>

#include "wan/crc32c.h"
#include "wan/quantize.h"
#include "wan/significance_filter.h"
#include "wan/sparse_index.h"

namespace geops::wan {
namespace {

constexpr ValueCodec kCodecs[] = {ValueCodec::kFp32, ValueCodec::kFp16, ValueCodec::kInt8,
                                  ValueCodec::kSign};

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
  // Body = 3 fixed records + index bytes + 4 bytes per value.
  size_t index_bytes = DeltaVarintBytes(in[0].indices) + BitmapBytes(4096);
  EXPECT_EQ(DeltaVarintBytes(in[0].indices), 1u + 2u + 2u);
  EXPECT_EQ(rt.stats.body_bytes, static_cast<int64_t>(3 * batch_format::kChunkFixedSize +
                                                      index_bytes + 4 * (3 + 2048 + 10)));
  // Both index encodings agree with ChooseIndexEncoding's size on random sets.
  std::mt19937 rng(5);
  for (int rep = 0; rep < 200; ++rep) {
    SparseChunkUpdate u = RandomUpdate(rng, {0, 0}, 1 + rng() % 3000, 0.002 * (rep % 100));
    size_t bytes = 0;
    IndexEncoding e = ChooseIndexEncoding(u.indices, u.num_elements, &bytes);
    size_t expect = u.indices.size() == u.num_elements
                        ? 0
                        : std::min(BitmapBytes(u.num_elements), DeltaVarintBytes(u.indices));
    ASSERT_EQ(bytes, expect);
    std::vector<uint8_t> buf(bytes + 1, 0xEE);
    EncodeIndex(e, u.indices, u.num_elements, buf.data());
    std::vector<uint32_t> back(u.indices.size());
    ASSERT_TRUE(DecodeIndex(e, std::span(buf.data(), bytes), u.num_elements, back).ok());
    ASSERT_EQ(back, u.indices);
    EXPECT_EQ(buf[bytes], 0xEE);  // wrote exactly `bytes`
  }
}

TEST(CodecTest, DeltaVarintHandlesLargeGapsAndRejectsOverflow) {
  std::vector<uint32_t> idx = {0, 127, 128, 16511, 0x7fffffffu, 0xfffffffeu};
  const uint32_t n = 0xffffffffu;
  size_t bytes = DeltaVarintBytes(idx);
  std::vector<uint8_t> buf(bytes);
  EncodeIndex(IndexEncoding::kDeltaVarint, idx, n, buf.data());
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
