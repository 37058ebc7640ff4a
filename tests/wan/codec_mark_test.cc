// The mark of a batch (batch_format::kFlagMarked): the trailer an outer
// step's contribution carries after its chunk records.
#include <gtest/gtest.h>

#include <cstring>
#include <span>
#include <utility>
#include <vector>

#include "wan/codec/codec.h"

namespace geops::wan {
namespace {

// An outer step's contribution carries its mark (each worker's last batch
// it holds) after its chunk records: it comes back as sent, compressed or
// not, also with no chunks; a mark cut short or followed by more bytes, or
// naming a clock below -1, is refused.
TEST(CodecTest, AMarkedBatchCarriesItsMarkAndABadMarkIsRefused) {
  SparseChunkUpdate u;
  u.key = ChunkKey{0, 1};
  u.num_elements = 300;
  for (uint32_t i = 0; i < 300; i += 3) {
    u.indices.push_back(i);
    u.values.push_back(0.25f * static_cast<float>(i % 11) - 1.0f);
  }
  std::vector<SparseChunkUpdate> in = {u};
  const std::vector<std::pair<Clock, int32_t>> covered = {{19, 0}, {-1, -1}, {123456789012, 7}};
  for (bool compress : {true, false}) {
    for (bool empty : {false, true}) {
      BatchEncoder enc(EncoderOptions{compress, 1});
      PreparedBody body;
      const std::span<const SparseChunkUpdate> chunks = empty ? std::span<const SparseChunkUpdate>() : in;
      ASSERT_TRUE(enc.EncodePrepared(ValueCodec::kInt4, chunks, &body, nullptr, nullptr, &covered).ok());
      EXPECT_TRUE(body.marked);
      BatchHeader h;
      h.origin = 1;
      h.seq = 3;
      h.clock = 20;
      std::vector<uint8_t> sealed;
      SealPrepared(h, body, &sealed);
      DecodedBatch decoded;
      Status s = BatchDecoder().Decode(sealed, &decoded);
      ASSERT_TRUE(s.ok()) << s.ToString();
      EXPECT_TRUE(decoded.header.marked);
      EXPECT_EQ(decoded.covered, covered);
      EXPECT_EQ(decoded.chunks.size(), empty ? 0u : 1u);
    }
  }
  // By hand: a raw body of one empty mark, then damaged versions of it.
  auto parse = [](std::vector<uint8_t> raw) {
    BatchHeader h;
    h.marked = true;
    h.chunk_count = 0;
    DecodedBatch out;
    return BatchDecoder().ParseBody(h, raw, &out);
  };
  std::vector<uint8_t> one = {1, 0, 0, 0};
  const int64_t clock = 5;
  const int32_t part = 0;
  one.insert(one.end(), reinterpret_cast<const uint8_t*>(&clock), reinterpret_cast<const uint8_t*>(&clock) + 8);
  one.insert(one.end(), reinterpret_cast<const uint8_t*>(&part), reinterpret_cast<const uint8_t*>(&part) + 4);
  EXPECT_TRUE(parse(one).ok());
  std::vector<uint8_t> cut(one.begin(), one.end() - 1);
  EXPECT_EQ(parse(cut).code(), StatusCode::kInvalidArgument);
  std::vector<uint8_t> longer = one;
  longer.push_back(0);
  EXPECT_EQ(parse(longer).code(), StatusCode::kInvalidArgument);
  std::vector<uint8_t> below = one;
  const int64_t minus_two = -2;
  std::memcpy(below.data() + 4, &minus_two, 8);
  Status s = parse(below);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("clock -2"), std::string::npos) << s.ToString();
  EXPECT_EQ(parse({1, 0}).code(), StatusCode::kInvalidArgument) << "a count cut short";
}

}  // namespace
}  // namespace geops::wan
