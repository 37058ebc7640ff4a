// Corrupted and truncated batches must decode to a clean error or to valid
// data, never crash or read out of bounds (run under ASan to be sure).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "wan/byte_io.h"
#include "wan/codec.h"
#include "wan/crc32c.h"

namespace geops::wan {
namespace {
namespace bf = batch_format;

constexpr ValueCodec kCodecs[] = {ValueCodec::kFp32, ValueCodec::kFp16, ValueCodec::kInt8,
                                  ValueCodec::kSign};

// Three chunks: delta-varint, bitmap and dense indices.
std::vector<SparseChunkUpdate> SmallUpdates() {
  std::vector<SparseChunkUpdate> in(3);
  in[0].key = {0, 1};
  in[0].num_elements = 300;
  in[0].indices = {3, 70, 299};
  in[0].values = {0.5f, -0.25f, 1.5f};
  in[1].key = {0, 2};
  in[1].num_elements = 40;
  for (uint32_t i = 0; i < 40; i += 2) {
    in[1].indices.push_back(i);
    in[1].values.push_back(i % 4 ? 1.0f + i : -2.0f - i);
  }
  in[2].key = {4, 0};
  in[2].num_elements = 6;
  in[2].indices = {0, 1, 2, 3, 4, 5};
  in[2].values = {1, -1, 2, -2, 3, -3};
  return in;
}

std::vector<uint8_t> Encode(ValueCodec codec, bool compress,
                            const std::vector<SparseChunkUpdate>& in = SmallUpdates()) {
  BatchEncoder enc(EncoderOptions{.compress = compress});
  BatchHeader h;
  h.origin = 1;
  h.seq = 9;
  h.clock = 4;
  h.codec = codec;
  std::vector<uint8_t> out;
  EXPECT_TRUE(enc.Encode(h, in, &out, nullptr).ok());
  return out;
}

// A batch of repetitive values, so that LZ4 really compresses it.
std::vector<SparseChunkUpdate> CompressibleUpdates() {
  std::vector<SparseChunkUpdate> in(1);
  in[0].key = {0, 0};
  in[0].num_elements = 600;
  for (uint32_t i = 0; i < 600; i += 2) {
    in[0].indices.push_back(i);
    in[0].values.push_back(i % 8 ? 0.5f : -0.5f);
  }
  return in;
}

bool AllowedError(const Status& s) {
  return s.code() == StatusCode::kInvalidArgument || s.code() == StatusCode::kDataLoss ||
         s.code() == StatusCode::kResourceExhausted;
}

void ExpectValid(const DecodedBatch& b) {
  ASSERT_EQ(b.chunks.size(), b.header.chunk_count);
  for (size_t c = 0; c < b.chunks.size(); ++c) {
    const SparseChunkUpdate& u = b.chunks[c];
    if (c > 0) {
      ASSERT_LT(b.chunks[c - 1].key, u.key);
    }
    ASSERT_EQ(u.indices.size(), u.values.size());
    ASSERT_GT(u.indices.size(), 0u);
    for (size_t j = 0; j < u.indices.size(); ++j) {
      ASSERT_LT(u.indices[j], u.num_elements);
      if (j > 0) {
        ASSERT_LT(u.indices[j - 1], u.indices[j]);
      }
      ASSERT_TRUE(std::isfinite(u.values[j]));
    }
  }
}

// Recomputes the checksum after the test edits a header field.
void FixChecksum(std::vector<uint8_t>* b) {
  uint32_t crc = Crc32c(b->data(), bf::kChecksumOffset);
  crc = Crc32cExtend(crc, b->data() + bf::kHeaderSize, b->size() - bf::kHeaderSize);
  std::memcpy(b->data() + bf::kChecksumOffset, &crc, 4);
}

template <typename T>
void Poke(std::vector<uint8_t>* b, size_t off, T v) {
  std::memcpy(b->data() + off, &v, sizeof(T));
  FixChecksum(b);
}

Status DecodeBytes(std::span<const uint8_t> bytes, DecodeLimits limits = {}) {
  BatchDecoder dec(limits);
  DecodedBatch out;
  Status s = dec.Decode(bytes, &out);
  if (s.ok()) ExpectValid(out);
  return s;
}

TEST(CodecFuzzTest, TruncationAtEveryLengthFailsCleanly) {
  for (ValueCodec codec : kCodecs) {
    for (bool compress : {false, true}) {
      std::vector<uint8_t> full =
          compress ? Encode(codec, true, CompressibleUpdates()) : Encode(codec, false);
      ASSERT_TRUE(DecodeBytes(full).ok());
      for (size_t len = 0; len < full.size(); ++len) {
        std::vector<uint8_t> cut(full.begin(), full.begin() + len);  // exact-size heap copy
        Status s = DecodeBytes(cut);
        ASSERT_FALSE(s.ok()) << "length " << len;
        ASSERT_TRUE(AllowedError(s)) << s.ToString();
      }
    }
  }
}

TEST(CodecFuzzTest, RandomByteFlipsDecodeToErrorsOrValidData) {
  std::mt19937 rng(1234);
  for (ValueCodec codec : kCodecs) {
    for (bool compress : {false, true}) {
      const std::vector<uint8_t> good =
          compress ? Encode(codec, true, CompressibleUpdates()) : Encode(codec, false);
      int errors = 0;
      for (int rep = 0; rep < 3000; ++rep) {
        std::vector<uint8_t> b = good;
        int flips = 1 + static_cast<int>(rng() % 4);
        for (int f = 0; f < flips; ++f)
          b[rng() % b.size()] ^= static_cast<uint8_t>(1 + rng() % 255);
        Status s = DecodeBytes(b);
        if (!s.ok()) {
          ASSERT_TRUE(AllowedError(s)) << s.ToString();
          ++errors;
        }
      }
      EXPECT_GT(errors, 2900);  // the checksum catches nearly every flip
    }
  }
}

TEST(CodecFuzzTest, CorruptBodiesBehindValidChecksumsAreRefused) {
  // Corrupt the body and seal it again, so that the body parser itself is
  // what must catch the damage.
  std::mt19937 rng(99);
  for (ValueCodec codec : kCodecs) {
    const std::vector<uint8_t> good = Encode(codec, false);
    Result<BatchHeader> h = PeekBatchHeader(good);
    ASSERT_TRUE(h.ok());
    const std::vector<uint8_t> body(good.begin() + bf::kHeaderSize, good.end());
    for (bool compress : {false, true}) {
      for (size_t len = 0; len < body.size(); ++len) {
        std::vector<uint8_t> sealed;
        ASSERT_TRUE(SealBatch(*h, std::span(body.data(), len), compress, 1, &sealed).ok());
        Status s = DecodeBytes(sealed);
        ASSERT_FALSE(s.ok()) << "body length " << len;
        ASSERT_TRUE(AllowedError(s)) << s.ToString();
      }
      int ok = 0;
      for (int rep = 0; rep < 3000; ++rep) {
        std::vector<uint8_t> b = body;
        int flips = 1 + static_cast<int>(rng() % 3);
        for (int f = 0; f < flips; ++f)
          b[rng() % b.size()] ^= static_cast<uint8_t>(1 + rng() % 255);
        std::vector<uint8_t> sealed;
        ASSERT_TRUE(SealBatch(*h, b, compress, 1, &sealed).ok());
        Status s = DecodeBytes(sealed);
        if (s.ok()) {
          ++ok;
        } else {
          ASSERT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
        }
      }
      // Value bytes may flip into other valid values; structure flips must not pass.
      EXPECT_LT(ok, 3000);
    }
  }
}

TEST(CodecFuzzTest, HeaderDefectsNameTheField) {
  const std::vector<uint8_t> good = Encode(ValueCodec::kInt8, false);
  auto expect = [](std::vector<uint8_t> b, StatusCode code, const char* what) {
    Status s = DecodeBytes(b);
    EXPECT_EQ(s.code(), code) << s.ToString();
    EXPECT_NE(s.message().find(what), std::string::npos) << s.message();
  };
  std::vector<uint8_t> b = good;
  Poke<uint32_t>(&b, bf::kMagicOffset, 0x12345678);
  expect(b, StatusCode::kInvalidArgument, "magic");
  b = good;
  Poke<uint16_t>(&b, bf::kVersionOffset, 2);
  expect(b, StatusCode::kInvalidArgument, "version");
  b = good;
  Poke<uint8_t>(&b, bf::kCodecOffset, 9);
  expect(b, StatusCode::kInvalidArgument, "codec");
  b = good;
  Poke<uint8_t>(&b, bf::kFlagsOffset, 0x80);
  expect(b, StatusCode::kInvalidArgument, "flags");
  b = good;
  Poke<uint32_t>(&b, bf::kReservedOffset, 1);
  expect(b, StatusCode::kInvalidArgument, "reserved");
  b = good;
  Poke<uint32_t>(&b, bf::kChunkCountOffset, 1000000);
  expect(b, StatusCode::kInvalidArgument, "chunk count");
  b = good;
  Poke<uint32_t>(&b, bf::kChunkCountOffset, 2);
  expect(b, StatusCode::kInvalidArgument, "trailing");
  b = good;
  Poke<uint32_t>(&b, bf::kChunkCountOffset, 4);
  expect(b, StatusCode::kInvalidArgument, "truncated");
  b = good;
  b[bf::kSeqOffset] ^= 1;  // checksum not fixed
  expect(b, StatusCode::kDataLoss, "checksum");
  b = good;
  b.push_back(0);
  expect(b, StatusCode::kDataLoss, "trailing bytes");
  b = good;
  Poke<uint32_t>(&b, bf::kBodySizeOffset, static_cast<uint32_t>(good.size()));
  expect(b, StatusCode::kInvalidArgument, "stored size");
  // Compressed body whose header claims a different decompressed size.
  std::vector<uint8_t> c = Encode(ValueCodec::kFp32, true, CompressibleUpdates());
  ASSERT_EQ(c[bf::kFlagsOffset], bf::kFlagLz4);
  uint32_t raw;
  std::memcpy(&raw, c.data() + bf::kBodySizeOffset, 4);
  b = c;
  Poke<uint32_t>(&b, bf::kBodySizeOffset, raw + 10);
  expect(b, StatusCode::kDataLoss, "decompressed size");
  b = c;
  Poke<uint32_t>(&b, bf::kBodySizeOffset, raw - 10);
  expect(b, StatusCode::kDataLoss, "LZ4");
  // Limits.
  DecodeLimits small;
  small.max_body_bytes = 16;
  EXPECT_EQ(DecodeBytes(good, small).code(), StatusCode::kResourceExhausted);
  small = {};
  small.max_batch_bytes = 50;
  EXPECT_EQ(DecodeBytes(good, small).code(), StatusCode::kResourceExhausted);
  small = {};
  small.max_chunk_elements = 100;
  Status s = DecodeBytes(good, small);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("num_elements"), std::string::npos) << s.message();
}

// Builds one chunk record by hand.
struct Record {
  uint32_t table = 0, chunk = 0, num_elements = 8, count = 1;
  uint8_t encoding = static_cast<uint8_t>(IndexEncoding::kDeltaVarint);
  std::vector<uint8_t> index = {2};
  float scale = 1.0f;
  std::vector<uint8_t> values;
};

Status DecodeRecords(ValueCodec codec, const std::vector<Record>& records) {
  std::vector<uint8_t> body;
  ByteWriter w(&body);
  for (const Record& r : records) {
    w.Put(r.table);
    w.Put(r.chunk);
    w.Put(r.num_elements);
    w.Put(r.count);
    w.Put(r.encoding);
    w.Put(static_cast<uint32_t>(r.index.size()));
    if (codec == ValueCodec::kInt8 || codec == ValueCodec::kSign) w.Put(r.scale);
    w.PutBytes(r.index.data(), r.index.size());
    w.PutBytes(r.values.data(), r.values.size());
  }
  BatchHeader h;
  h.codec = codec;
  h.chunk_count = static_cast<uint32_t>(records.size());
  std::vector<uint8_t> sealed;
  EXPECT_TRUE(SealBatch(h, body, false, 1, &sealed).ok());
  return DecodeBytes(sealed);
}

std::vector<uint8_t> FloatBytes(std::vector<float> v) {
  std::vector<uint8_t> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

TEST(CodecFuzzTest, BodyDefectsNameTheField) {
  auto expect = [](Status s, const char* what) {
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
    EXPECT_NE(s.message().find(what), std::string::npos) << s.message();
  };
  Record r;
  r.values = FloatBytes({1.5f});
  ASSERT_TRUE(DecodeRecords(ValueCodec::kFp32, {r}).ok());

  Record nan = r;
  nan.values = FloatBytes({NAN});
  expect(DecodeRecords(ValueCodec::kFp32, {nan}), "not a finite");
  Record inf = r;
  inf.values = {0x00, 0x7c};  // fp16 +Inf
  expect(DecodeRecords(ValueCodec::kFp16, {inf}), "not a finite");
  Record beyond = r;
  beyond.index = {8};
  expect(DecodeRecords(ValueCodec::kFp32, {beyond}), ">= chunk size");
  Record count = r;
  count.count = 9;
  expect(DecodeRecords(ValueCodec::kFp32, {count}), "value count");
  Record zero = r;
  zero.num_elements = 0;
  expect(DecodeRecords(ValueCodec::kFp32, {zero}), "num_elements");
  Record enc = r;
  enc.encoding = 7;
  expect(DecodeRecords(ValueCodec::kFp32, {enc}), "index encoding");
  Record bitmap = r;
  bitmap.encoding = static_cast<uint8_t>(IndexEncoding::kBitmap);
  bitmap.index = {0x04, 0x00};
  expect(DecodeRecords(ValueCodec::kFp32, {bitmap}), "bitmap");
  Record stray = r;
  stray.encoding = static_cast<uint8_t>(IndexEncoding::kBitmap);
  stray.num_elements = 5;
  stray.index = {0x21};  // bit 5 is beyond 5 elements
  stray.count = 2;
  stray.values = FloatBytes({1, 2});
  expect(DecodeRecords(ValueCodec::kFp32, {stray}), "beyond chunk size");
  Record dense = r;
  dense.encoding = static_cast<uint8_t>(IndexEncoding::kDense);
  dense.index = {};
  expect(DecodeRecords(ValueCodec::kFp32, {dense}), "dense");
  Record scale = r;
  scale.values = {5};
  scale.scale = 0.0f;
  expect(DecodeRecords(ValueCodec::kInt8, {scale}), "scale");
  scale.scale = NAN;
  expect(DecodeRecords(ValueCodec::kSign, {scale}), "scale");
  Record int8 = r;
  int8.values = {0x80};
  expect(DecodeRecords(ValueCodec::kInt8, {int8}), "invalid code");
  Record sign = r;
  sign.values = {0x02};  // bit 1 set with one value
  expect(DecodeRecords(ValueCodec::kSign, {sign}), "sign bits");
  Record a = r, b = r;
  a.chunk = 5;
  b.chunk = 5;
  expect(DecodeRecords(ValueCodec::kFp32, {a, b}), "not after");
  Record index_len = r;
  index_len.index = {0x80, 0x80, 0x01, 2};
  expect(DecodeRecords(ValueCodec::kFp32, {index_len}), "delta-varint");
}

}  // namespace
}  // namespace geops::wan
