#include "common/model_spec.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>

namespace geops {
namespace {

TEST(ModelSpecTest, CutsTablesIntoRowChunks) {
  auto spec = ModelSpec::Create({{"w", 100, 1024}, {"b", 1, 10}}, 16 * 1024);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->rows_per_chunk(0), 4);  // 4 rows x 1024 floats = 16 KiB
  EXPECT_EQ(spec->num_chunks(0), 25u);
  EXPECT_EQ(spec->num_chunks(1), 1u);
  EXPECT_EQ(spec->ChunkElements({1, 0}), 10);
  EXPECT_EQ(spec->total_chunks(), 26);
  EXPECT_EQ(spec->total_elements(), 100 * 1024 + 10);
}

TEST(ModelSpecTest, LastChunkIsShort) {
  auto spec = ModelSpec::Create({{"w", 10, 3}}, 16);  // 1 row per... 16/(3*4)=1
  ASSERT_TRUE(spec.ok());
  auto spec2 = ModelSpec::Create({{"w", 10, 1}}, 12);  // 3 rows per chunk
  ASSERT_TRUE(spec2.ok());
  EXPECT_EQ(spec2->num_chunks(0), 4u);
  EXPECT_EQ(spec2->ChunkRows({0, 3}), 1);
  EXPECT_EQ(spec2->ChunkOffset({0, 3}), 9);
}

TEST(ModelSpecTest, EveryChunkHasExactlyOneShardAndShardsBalance) {
  auto spec = ModelSpec::Create({{"a", 1000, 64}, {"b", 7, 5}, {"c", 300, 300}});
  ASSERT_TRUE(spec.ok());
  const int shards = 3;
  std::set<uint64_t> seen;
  size_t biggest = 0, smallest = SIZE_MAX;
  for (int s = 0; s < shards; ++s) {
    auto chunks = spec->ChunksOfShard(s, shards);
    biggest = std::max(biggest, chunks.size());
    smallest = std::min(smallest, chunks.size());
    for (ChunkKey k : chunks) {
      EXPECT_EQ(spec->ShardOf(k, shards), s);
      EXPECT_TRUE(seen.insert(k.Packed()).second);
    }
  }
  EXPECT_EQ(static_cast<int64_t>(seen.size()), spec->total_chunks());
  EXPECT_LE(biggest - smallest, 1u);
}

TEST(ModelSpecTest, RejectsBadTables) {
  EXPECT_EQ(ModelSpec::Create({}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ModelSpec::Create({{"w", 0, 3}}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ModelSpec::Create({{"w", 2, 3}, {"w", 1, 1}}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ModelSpec::Create({{"has space", 2, 3}}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ModelSpec::Create({{"w", 2, 3}}, 2).status().code(), StatusCode::kInvalidArgument);
}

TEST(ModelSpecTest, FingerprintDependsOnShapesAndNames) {
  auto a = ModelSpec::Create({{"w", 2, 3}});
  auto b = ModelSpec::Create({{"w", 3, 2}});
  auto c = ModelSpec::Create({{"v", 2, 3}});
  auto a2 = ModelSpec::Create({{"w", 2, 3}});
  EXPECT_NE(a->Fingerprint(), b->Fingerprint());
  EXPECT_NE(a->Fingerprint(), c->Fingerprint());
  EXPECT_EQ(a->Fingerprint(), a2->Fingerprint());
  EXPECT_EQ(a->FindTable("v").status().code(), StatusCode::kNotFound);
}

TEST(ModelSpecTest, InitIsDeterministicPerChunkAndScaled) {
  TableSpec w{"w", 64, 64, InitKind::kUniform, 0.5f};
  TableSpec n{"n", 64, 64, InitKind::kNormal, 0.1f};
  auto a = ModelSpec::Create({w, n}, 1024, 7);
  auto b = ModelSpec::Create({w, n}, 1024, 7);
  auto c = ModelSpec::Create({w, n}, 1024, 8);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  std::vector<float> x(a->ChunkElements({0, 1})), y(x.size()), z(x.size());
  a->InitChunk({0, 1}, x.data());
  b->InitChunk({0, 1}, y.data());
  c->InitChunk({0, 1}, z.data());
  EXPECT_EQ(x, y);
  EXPECT_NE(x, z);
  for (float v : x) {
    EXPECT_LE(std::abs(v), 0.5f);
  }
  std::vector<float> g(a->ChunkElements({1, 0}));
  a->InitChunk({1, 0}, g.data());
  double sum2 = 0;
  for (float v : g) sum2 += v * v;
  EXPECT_NEAR(std::sqrt(sum2 / g.size()), 0.1, 0.02);
  EXPECT_NE(a->Fingerprint(), c->Fingerprint());
}

}  // namespace
}  // namespace geops

namespace geops {
namespace {

TEST(ModelSpecClientTest, ValuesChecksumSeesEveryBit) {
  std::vector<float> v(1001);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i) * 0.25f;
  const uint64_t base = ValuesChecksum(v);
  EXPECT_EQ(ValuesChecksum(v), base);
  for (size_t i : {size_t{0}, size_t{3}, size_t{500}, size_t{1000}}) {
    std::vector<float> w = v;
    w[i] = std::nextafter(w[i], 1e9f);
    EXPECT_NE(ValuesChecksum(w), base) << i;
  }
  std::vector<float> zero = {0.0f}, negative_zero = {-0.0f};
  EXPECT_NE(ValuesChecksum(zero), ValuesChecksum(negative_zero));
  std::vector<float> shorter(v.begin(), v.end() - 1);
  EXPECT_NE(ValuesChecksum(shorter), base);
}

TEST(ModelSpecClientTest, FingerprintCoversTheChecksumButNotTheSeed) {
  auto make = [](uint64_t checksum, uint64_t seed) {
    return *ModelSpec::Create({{"w", 4, 4, InitKind::kProvided, 0.0f, checksum}}, 256, seed);
  };
  EXPECT_NE(make(1, 0).Fingerprint(), make(2, 0).Fingerprint());
  EXPECT_EQ(make(1, 0).Fingerprint(), make(1, 9).Fingerprint());
  EXPECT_TRUE(make(1, 0).client_defined());
  EXPECT_FALSE(make(1, 0).HasInitialValues(ChunkKey{0, 0}));
}

TEST(ModelSpecClientTest, InitialValuesMustFitTheirChunks) {
  ModelSpec spec = *ModelSpec::Create({{"w", 4, 4, InitKind::kProvided, 0.0f, 1}}, 32, 0);  // 2 rows a chunk
  auto values = std::make_shared<ChunkValuesMap>();
  (*values)[ChunkKey{0, 1}] = std::vector<float>(8, 2.0f);
  auto with = spec.WithInitialValues(values);
  ASSERT_TRUE(with.ok());
  std::vector<float> out(8);
  with->InitChunk(ChunkKey{0, 1}, out.data());
  EXPECT_EQ(out, std::vector<float>(8, 2.0f));
  (*values)[ChunkKey{0, 0}] = std::vector<float>(7, 1.0f);
  Status s = spec.WithInitialValues(values).status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("hold 7 floats, not 8"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace geops
