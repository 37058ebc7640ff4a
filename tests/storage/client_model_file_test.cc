// The model file that keeps a client-defined model next to its store.
#include "storage/client_model_file.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tests/storage/storage_test_util.h"

namespace geops::storage {
namespace {

ModelSpec ClientModel(std::vector<float>* a) {
  a->resize(40 * 16);
  for (size_t i = 0; i < a->size(); ++i) (*a)[i] = 0.5f * static_cast<float>(i) - 3.0f;
  ModelSpec spec = *ModelSpec::Create({{"enc.weight", 40, 16, InitKind::kProvided, 0.0f, ValuesChecksum(*a)}}, 256, 0);
  auto values = std::make_shared<ChunkValuesMap>();
  for (ChunkKey k : spec.ChunksOfShard(1, 2)) {
    const float* src = a->data() + spec.ChunkOffset(k);
    (*values)[k] = std::vector<float>(src, src + spec.ChunkElements(k));
  }
  return *spec.WithInitialValues(values);
}

TEST(ClientModelFileTest, RoundTripsTheSchemaAndTheShardsInitialValues) {
  testing::TempDir dir;
  std::vector<float> a;
  ModelSpec spec = ClientModel(&a);
  auto none = ReadClientModel(dir.path() + "/store");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());

  ASSERT_TRUE(WriteClientModel(dir.path() + "/store", spec).ok());
  auto read = ReadClientModel(dir.path() + "/store");
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  ASSERT_TRUE(read->has_value());
  const ModelSpec& back = **read;
  EXPECT_EQ(back.Fingerprint(), spec.Fingerprint());
  EXPECT_TRUE(back.CheckSameSchema(spec, "the file").ok());
  for (ChunkKey k : spec.ChunksOfShard(1, 2)) {
    ASSERT_TRUE(back.HasInitialValues(k));
    std::vector<float> got(spec.ChunkElements(k));
    back.InitChunk(k, got.data());
    EXPECT_EQ(got, spec.initial_values()->at(k));
  }
  EXPECT_FALSE(back.HasInitialValues(ChunkKey{0, 0}));  // shard 0's chunk
}

TEST(ClientModelFileTest, ADamagedOrTruncatedFileIsDataLossNamingTheFile) {
  testing::TempDir dir;
  std::vector<float> a;
  ASSERT_TRUE(WriteClientModel(dir.path(), ClientModel(&a)).ok());
  const std::string path = dir.path() + "/" + kModelFileName;
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  std::string flipped = bytes;
  flipped[bytes.size() / 2] ^= 0x10;
  std::ofstream(path, std::ios::binary | std::ios::trunc) << flipped;
  Status damaged = ReadClientModel(dir.path()).status();
  EXPECT_EQ(damaged.code(), StatusCode::kDataLoss);
  EXPECT_NE(damaged.message().find(path), std::string::npos) << damaged.message();

  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes.substr(0, bytes.size() - 9);
  EXPECT_EQ(ReadClientModel(dir.path()).status().code(), StatusCode::kDataLoss);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << "not a model";
  EXPECT_EQ(ReadClientModel(dir.path()).status().code(), StatusCode::kDataLoss);
}

TEST(ClientModelFileTest, OnlyAClientDefinedModelIsWritten) {
  testing::TempDir dir;
  ModelSpec builtin = *ModelSpec::Create({{"w", 4, 4, InitKind::kUniform, 0.1f}}, 256, 3);
  EXPECT_EQ(WriteClientModel(dir.path(), builtin).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace geops::storage
