// Corrupted and truncated batches must decode to a clean error or to valid
// data, never crash or read out of bounds (run under ASan to be sure).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <optional>
#include <random>

#include "wan/codec/codec.h"
#include "wan/codec/crc32c.h"
#include "wan/codec/sparse_index.h"

namespace geops::wan {
namespace {
namespace bf = batch_format;

constexpr ValueCodec kCodecs[] = {ValueCodec::kFp32, ValueCodec::kFp16, ValueCodec::kInt8,
                                  ValueCodec::kSign, ValueCodec::kInt4};

// Four chunks: delta-varint, bitmap, dense and Rice indices.
std::vector<SparseChunkUpdate> SmallUpdates() {
  std::vector<SparseChunkUpdate> in(4);
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
  // 40 of 20000, gaps of a few hundred: Rice (~11 bits each) beats
  // delta-varint (16 bits each).
  in[3].key = {4, 3};
  in[3].num_elements = 20000;
  for (uint32_t i = 0; i < 40; ++i) {
    in[3].indices.push_back(i * 487 + (i * i) % 97);
    in[3].values.push_back(i % 3 ? 0.25f * i : -1.0f - i);
  }
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
  Result<EncodeStats> st = enc.Encode(h, in, &out, nullptr);
  EXPECT_TRUE(st.ok());
  if (st.ok() && in.size() == 4) {
    // The fuzzing below covers every index encoding.
    EXPECT_EQ(st->varint_chunks, 1);
    EXPECT_EQ(st->bitmap_chunks, 1);
    EXPECT_EQ(st->dense_chunks, 1);
    EXPECT_EQ(st->rice_chunks, 1);
  }
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
  Poke<uint16_t>(&b, bf::kVersionOffset, 1);  // the fixed-record format
  expect(b, StatusCode::kInvalidArgument, "unsupported version 1");
  b = good;
  Poke<uint16_t>(&b, bf::kVersionOffset, 3);
  expect(b, StatusCode::kInvalidArgument, "unsupported version 3");
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
  Poke<uint32_t>(&b, bf::kChunkCountOffset, 3);
  expect(b, StatusCode::kInvalidArgument, "trailing");
  b = good;
  Poke<uint32_t>(&b, bf::kChunkCountOffset, 5);
  expect(b, StatusCode::kInvalidArgument, "truncated");
  // The count check uses the smallest record of the codec: 11 bytes for
  // int8 (6 head bytes, scale, one value).
  static_assert(bf::MinChunkRecordSize(ValueCodec::kInt8) == 11);
  const uint32_t body = static_cast<uint32_t>(good.size() - bf::kHeaderSize);
  b = good;
  Poke<uint32_t>(&b, bf::kChunkCountOffset, body / 11 + 1);
  expect(b, StatusCode::kInvalidArgument, "chunk count");
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

// Builds one chunk record by hand, in the version 2 layout.
struct Record {
  uint32_t table = 0, chunk = 0, num_elements = 8, count = 1;
  uint8_t encoding = static_cast<uint8_t>(IndexEncoding::kDeltaVarint);
  std::vector<uint8_t> index = {2};
  float scale = 1.0f;
  std::vector<uint8_t> values;
  // When set, written instead of the chunk delta computed from `chunk`.
  std::optional<uint32_t> chunk_field;
  // When not empty, written instead of the whole record head.
  std::vector<uint8_t> raw_head;
};

void PutVarintTo(std::vector<uint8_t>* out, uint32_t v) {
  uint8_t buf[bf::kMaxVarintBytes];
  out->insert(out->end(), buf, PutVarint(buf, v));
}

Status DecodeRecords(ValueCodec codec, const std::vector<Record>& records) {
  std::vector<uint8_t> body;
  const Record* prev = nullptr;
  for (const Record& r : records) {
    if (!r.raw_head.empty()) {
      body.insert(body.end(), r.raw_head.begin(), r.raw_head.end());
    } else {
      const bool same = prev != nullptr && prev->table == r.table;
      PutVarintTo(&body, r.table);
      PutVarintTo(&body, r.chunk_field ? *r.chunk_field : same ? r.chunk - prev->chunk : r.chunk);
      PutVarintTo(&body, r.num_elements);
      PutVarintTo(&body, r.count);
      body.push_back(r.encoding);
      PutVarintTo(&body, static_cast<uint32_t>(r.index.size()));
    }
    if (bf::HasScale(codec)) {
      const uint8_t* f = reinterpret_cast<const uint8_t*>(&r.scale);
      body.insert(body.end(), f, f + 4);
    }
    body.insert(body.end(), r.index.begin(), r.index.end());
    body.insert(body.end(), r.values.begin(), r.values.end());
    prev = &r;
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
  Record index_long = r;
  index_long.index = {0x82, 0x00};  // 2 with a redundant zero group
  expect(DecodeRecords(ValueCodec::kFp32, {index_long}), "delta-varint index: varint 0 of 1 is overlong");
}

// Random Rice and delta-varint fields: every one decodes to valid indices
// or to InvalidArgument, and whatever decodes is canonical: encoding the
// indices again (with the same k) gives back exactly the same bytes.
TEST(CodecFuzzTest, RandomIndexFieldsAreRefusedOrCanonical) {
  std::mt19937 rng(2024);
  int ok[2] = {0, 0};
  for (int rep = 0; rep < 200000; ++rep) {
    const bool rice = rep % 2 == 0;
    std::vector<uint8_t> field(rng() % 12);
    for (uint8_t& b : field) {
      // Mostly small bytes so that short codes and varints turn up often.
      b = static_cast<uint8_t>(rng() % 4 == 0 ? rng() : rng() % 8);
    }
    if (rice && !field.empty()) field[0] = static_cast<uint8_t>(rng() % 34);
    const uint32_t n = rng() % 3 == 0 ? 0xffffffffu : 1 + rng() % 300;
    std::vector<uint32_t> out(rng() % 12);
    if (out.size() > n) continue;
    const IndexEncoding e = rice ? IndexEncoding::kRice : IndexEncoding::kDeltaVarint;
    Status s = DecodeIndex(e, field, n, out);
    if (!s.ok()) {
      ASSERT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
      continue;
    }
    ++ok[rice];
    for (size_t j = 0; j < out.size(); ++j) {
      ASSERT_LT(out[j], n);
      if (j > 0) {
        ASSERT_LT(out[j - 1], out[j]);
      }
    }
    IndexPlan plan{e, rice ? RiceBytes(out, field[0]) : DeltaVarintBytes(out),
                   rice ? field[0] : 0u};
    ASSERT_EQ(plan.bytes, field.size());
    std::vector<uint8_t> again(plan.bytes);
    EncodeIndex(plan, out, n, again.data());
    ASSERT_EQ(again, field);
  }
  EXPECT_GT(ok[0], 1000);
  EXPECT_GT(ok[1], 1000);
}

TEST(CodecFuzzTest, RecordHeadDefectsNameTheField) {
  auto expect = [](Status s, const char* what) {
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
    EXPECT_NE(s.message().find(what), std::string::npos) << s.message();
  };
  Record r;
  r.values = FloatBytes({1.5f});
  // Head bytes of `r`: table 0, chunk 0, 8 elements, 1 value, delta-varint, 1 index byte.
  Record raw = r;
  raw.raw_head = {0, 0, 8, 1, 2, 1};
  ASSERT_TRUE(DecodeRecords(ValueCodec::kFp32, {raw}).ok());
  raw.raw_head = {0x80, 0x00, 0, 8, 1, 2, 1};  // table 0 in two bytes
  expect(DecodeRecords(ValueCodec::kFp32, {raw}), "chunk 0 record field table is overlong");
  raw.raw_head = {0, 0x80, 0x80, 0x80, 0x80, 0x10, 8, 1, 2, 1};  // 2^32
  expect(DecodeRecords(ValueCodec::kFp32, {raw}), "field chunk delta overflows 32 bits");
  raw.raw_head = {0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 1, 2, 1};  // six bytes
  expect(DecodeRecords(ValueCodec::kFp32, {raw}), "field num_elements overflows");
  raw.raw_head = {0, 0, 8, 1, 2, 0x81, 0x00};
  expect(DecodeRecords(ValueCodec::kFp32, {raw}), "field index_bytes is overlong");
  // A body that ends inside the count of the second record.
  Record first = r;
  first.count = 3;
  first.index = {1, 0, 0};
  first.values = FloatBytes({1, 2, 3});
  Record cut;
  cut.raw_head = {1, 0, 8, 0x81};
  cut.index = {};
  expect(DecodeRecords(ValueCodec::kFp32, {first, cut}), "chunk 1 record field count is truncated");
  Record in_enc;
  in_enc.raw_head = {1, 0, 8, 1};  // ends right before the index encoding byte
  in_enc.index = {};
  Record second = first;
  second.chunk = 1;
  expect(DecodeRecords(ValueCodec::kFp32, {first, second, in_enc}),
         "chunk 2 (table 1, chunk 0): record truncated in its index encoding");
  // Chunk deltas: 0 repeats a key; a step past 2^32 - 1 overflows; a table
  // going backwards breaks the order.
  Record a = r, b = r;
  a.chunk = 0xfffffff0u;
  b.chunk_field = 0x20;
  expect(DecodeRecords(ValueCodec::kFp32, {a, b}), "chunk id overflows 32 bits");
  b.chunk_field = 0;
  expect(DecodeRecords(ValueCodec::kFp32, {a, b}), "chunk delta 0");
  a.table = 2;
  b = r;
  b.table = 1;
  b.chunk = 0xfffffff5u;
  expect(DecodeRecords(ValueCodec::kFp32, {a, b}), "not after");
  // Deltas accumulate: chunks 7, 7 + 3, then table 1 restarts at its own id.
  Record c1 = r, c2 = r, c3 = r;
  c1.chunk = 7;
  c2.chunk = 10;
  c3.table = 1;
  c3.chunk = 4;
  ASSERT_TRUE(DecodeRecords(ValueCodec::kFp32, {c1, c2, c3}).ok());
  // The same three records as bytes: the second names chunk 10 as +3.
  BatchDecoder dec;
  DecodedBatch out;
  std::vector<uint8_t> hand;
  for (uint8_t x : {0, 7, 8, 1, 2, 1, 2}) hand.push_back(x);
  for (uint8_t x : {0, 0, 0xc0, 0x3f}) hand.push_back(x);  // 1.5f
  for (uint8_t x : {0, 3, 8, 1, 2, 1, 2}) hand.push_back(x);
  for (uint8_t x : {0, 0, 0xc0, 0x3f}) hand.push_back(x);
  for (uint8_t x : {1, 4, 8, 1, 2, 1, 2}) hand.push_back(x);
  for (uint8_t x : {0, 0, 0xc0, 0x3f}) hand.push_back(x);
  BatchHeader h;
  h.codec = ValueCodec::kFp32;
  h.chunk_count = 3;
  ASSERT_TRUE(dec.ParseBody(h, hand, &out).ok());
  ASSERT_EQ(out.chunks.size(), 3u);
  EXPECT_EQ(out.chunks[0].key, (ChunkKey{0, 7}));
  EXPECT_EQ(out.chunks[1].key, (ChunkKey{0, 10}));
  EXPECT_EQ(out.chunks[2].key, (ChunkKey{1, 4}));
  EXPECT_EQ(out.chunks[2].indices, std::vector<uint32_t>{2});
  EXPECT_EQ(out.chunks[2].values, std::vector<float>{1.5f});
}

TEST(CodecFuzzTest, Int4AndRiceDefectsNameTheField) {
  auto expect = [](Status s, const char* what) {
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
    EXPECT_NE(s.message().find(what), std::string::npos) << s.message();
  };
  Record r;
  r.values = {0x01};  // int4 code 1
  ASSERT_TRUE(DecodeRecords(ValueCodec::kInt4, {r}).ok());
  Record minus8 = r;
  minus8.values = {0x08};
  expect(DecodeRecords(ValueCodec::kInt4, {minus8}), "value 0 is not a finite number (or an invalid code)");
  Record minus8_hi = r;
  minus8_hi.count = 2;
  minus8_hi.index = {2, 0};
  minus8_hi.values = {0x81};
  expect(DecodeRecords(ValueCodec::kInt4, {minus8_hi}), "value 1 is not a finite");
  Record stray = r;
  stray.values = {0x31};  // one value, high nibble 3
  expect(DecodeRecords(ValueCodec::kInt4, {stray}), "int4 high nibble set beyond the value count");
  Record huge = r;
  huge.values = {0x07};
  huge.scale = 3e38f;  // 7 * scale overflows
  expect(DecodeRecords(ValueCodec::kInt4, {huge}), "not a finite");
  Record scale = r;
  scale.scale = -1.0f;
  expect(DecodeRecords(ValueCodec::kInt4, {scale}), "scale");
  Record short_values = r;
  short_values.count = 3;
  short_values.index = {0, 0, 0};
  short_values.values = {0x11};  // 3 values need 2 bytes
  expect(DecodeRecords(ValueCodec::kInt4, {short_values}), "run past the body end");

  Record rice = r;
  rice.encoding = static_cast<uint8_t>(IndexEncoding::kRice);
  rice.index = {0, 0x07};  // k = 0, value 3
  ASSERT_TRUE(DecodeRecords(ValueCodec::kInt4, {rice}).ok());
  const std::pair<std::vector<uint8_t>, const char*> bad[] = {
      {{}, "rice index: empty field"},
      {{40, 0x07}, "rice index: parameter k 40"},
      {{0, 0x87}, "rice index: nonzero padding"},
      {{0, 0x07, 0}, "rice index: 1 trailing bytes"},
      {{0, 0xff, 0xff, 0xff}, "rice index: input ends inside value 0 of 1 (unterminated"},
      {{0, 0xff, 0xff, 0xff, 0xff, 3, 0, 0, 0}, "rice index: value 0 is escaped but fits the unary code (overlong)"},
      {{3, 0x01}, "rice index: index 8 (entry 0) >= chunk size 8"},  // q 1, low bits 0
  };
  for (const auto& [index, what] : bad) {
    Record x = rice;
    x.index = index;
    Status s = DecodeRecords(ValueCodec::kInt4, {x});
    expect(s, what);
    expect(s, "chunk 0 (table 0, chunk 0)");
  }
}

}  // namespace
}  // namespace geops::wan
