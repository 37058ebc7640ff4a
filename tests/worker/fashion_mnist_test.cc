// Tests of the Fashion-MNIST reader, partitioning, batch sampling, and a
// short standalone training run on the real data.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <zlib.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "worker/cpu_backend.h"
#include "worker/dataset.h"
#include "worker/fashion_mnist.h"
#include "worker/mlp_model.h"

namespace geops::worker {
namespace {

using Bytes = std::vector<uint8_t>;

void PutBigEndian(Bytes* b, uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) b->push_back(static_cast<uint8_t>(v >> s));
}

Bytes ImagesIdx(uint32_t count, uint32_t rows = 28, uint32_t cols = 28,
                uint32_t magic = kIdxImagesMagic) {
  Bytes b;
  PutBigEndian(&b, magic);
  PutBigEndian(&b, count);
  PutBigEndian(&b, rows);
  PutBigEndian(&b, cols);
  for (uint32_t i = 0; i < count * rows * cols; ++i) b.push_back(static_cast<uint8_t>(i % 256));
  return b;
}

Bytes LabelsIdx(uint32_t count, uint32_t magic = kIdxLabelsMagic) {
  Bytes b;
  PutBigEndian(&b, magic);
  PutBigEndian(&b, count);
  for (uint32_t i = 0; i < count; ++i) b.push_back(static_cast<uint8_t>(i % 10));
  return b;
}

class IdxFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = ::testing::TempDir() + "geops_idx_XXXXXX";
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string Gz(const std::string& name, const Bytes& content) {
    const std::string path = dir_ + "/" + name;
    gzFile f = gzopen(path.c_str(), "wb");
    EXPECT_NE(f, nullptr);
    if (!content.empty()) {
      EXPECT_EQ(gzwrite(f, content.data(), static_cast<unsigned>(content.size())),
                static_cast<int>(content.size()));
    }
    gzclose(f);
    return path;
  }
  std::string Raw(const std::string& name, const Bytes& content) {
    const std::string path = dir_ + "/" + name;
    FILE* f = std::fopen(path.c_str(), "wb");
    EXPECT_NE(f, nullptr);
    std::fwrite(content.data(), 1, content.size(), f);
    std::fclose(f);
    return path;
  }
  // Expects `code` and a message naming `path` and every extra fragment.
  static void ExpectError(const Result<Dataset>& r, StatusCode code, const std::string& path,
                          const std::vector<std::string>& fragments = {}) {
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), code) << r.status().ToString();
    EXPECT_NE(r.status().message().find(path), std::string::npos) << r.status().ToString();
    for (const auto& f : fragments) {
      EXPECT_NE(r.status().message().find(f), std::string::npos) << r.status().ToString();
    }
  }

  std::string dir_;
};

TEST_F(IdxFilesTest, ReadsWellFormedFiles) {
  auto data = ReadFashionMnistFiles(Gz("i.gz", ImagesIdx(3)), Gz("l.gz", LabelsIdx(3)));
  ASSERT_TRUE(data.ok()) << data.status().ToString();
  EXPECT_EQ(data->n, 3);
  EXPECT_EQ(data->dims, 784);
  EXPECT_EQ(data->num_classes, 10);
  ASSERT_EQ(data->x.size(), 3u * 784);
  EXPECT_EQ(data->y, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_FLOAT_EQ(data->x[0], 0.0f);
  EXPECT_FLOAT_EQ(data->x[255], 1.0f);
  EXPECT_FLOAT_EQ(data->x[784 + 1], static_cast<float>((784 + 1) % 256) / 255.0f);
}

TEST_F(IdxFilesTest, BadMagicIsDataLoss) {
  const std::string images = Gz("i.gz", ImagesIdx(3, 28, 28, 2049));
  ExpectError(ReadFashionMnistFiles(images, Gz("l.gz", LabelsIdx(3))), StatusCode::kDataLoss,
              images, {"magic 2049", "2051"});
  const std::string labels = Gz("l2.gz", LabelsIdx(3, 2051));
  ExpectError(ReadFashionMnistFiles(Gz("i2.gz", ImagesIdx(3)), labels), StatusCode::kDataLoss,
              labels, {"2049"});
}

TEST_F(IdxFilesTest, TruncatedDataIsDataLossWithByteCounts) {
  Bytes short_images = ImagesIdx(3);
  short_images.resize(16 + 2 * 784 + 100);
  const std::string images = Gz("i.gz", short_images);
  ExpectError(ReadFashionMnistFiles(images, Gz("l.gz", LabelsIdx(3))), StatusCode::kDataLoss,
              images, {"truncated", "expected 2352", "read 1668"});
  Bytes short_labels = LabelsIdx(5);
  short_labels.pop_back();
  const std::string labels = Gz("l2.gz", short_labels);
  ExpectError(ReadFashionMnistFiles(Gz("i2.gz", ImagesIdx(5)), labels), StatusCode::kDataLoss,
              labels, {"expected 5", "read 4"});
  const std::string header_only = Gz("l3.gz", Bytes{0, 0, 8});
  ExpectError(ReadFashionMnistFiles(Gz("i3.gz", ImagesIdx(5)), header_only),
              StatusCode::kDataLoss, header_only, {"header"});
}

TEST_F(IdxFilesTest, CutCompressedStreamIsDataLoss) {
  const std::string whole = Gz("whole.gz", ImagesIdx(50));
  Bytes compressed;
  {
    FILE* f = std::fopen(whole.c_str(), "rb");
    ASSERT_NE(f, nullptr);
    int c;
    while ((c = std::fgetc(f)) != EOF) compressed.push_back(static_cast<uint8_t>(c));
    std::fclose(f);
  }
  compressed.resize(compressed.size() / 2);
  const std::string cut = Raw("cut.gz", compressed);
  ExpectError(ReadFashionMnistFiles(cut, Gz("l.gz", LabelsIdx(50))), StatusCode::kDataLoss, cut);
}

TEST_F(IdxFilesTest, UncompressedFileIsDataLoss) {
  const std::string plain = Raw("plain.gz", ImagesIdx(2));
  ExpectError(ReadFashionMnistFiles(plain, Gz("l.gz", LabelsIdx(2))), StatusCode::kDataLoss, plain,
              {"not a gzip"});
}

TEST_F(IdxFilesTest, CountMismatchIsDataLossNamingBothFiles) {
  const std::string images = Gz("i.gz", ImagesIdx(4));
  const std::string labels = Gz("l.gz", LabelsIdx(3));
  ExpectError(ReadFashionMnistFiles(images, labels), StatusCode::kDataLoss, images, {labels});
}

TEST_F(IdxFilesTest, WrongImageSizeTrailingDataAndBadLabelsAreDataLoss) {
  const std::string small = Gz("small.gz", ImagesIdx(2, 27, 28));
  ExpectError(ReadFashionMnistFiles(small, Gz("l.gz", LabelsIdx(2))), StatusCode::kDataLoss, small,
              {"27x28"});
  Bytes extra = ImagesIdx(2);
  extra.push_back(0);
  const std::string trailing = Gz("trailing.gz", extra);
  ExpectError(ReadFashionMnistFiles(trailing, Gz("l2.gz", LabelsIdx(2))), StatusCode::kDataLoss,
              trailing, {"trailing"});
  Bytes bad = LabelsIdx(3);
  bad.back() = 10;
  const std::string labels = Gz("bad_labels.gz", bad);
  ExpectError(ReadFashionMnistFiles(Gz("i3.gz", ImagesIdx(3)), labels), StatusCode::kDataLoss,
              labels, {"index 2"});
}

TEST_F(IdxFilesTest, MissingFileIsNotFoundNamingThePackage) {
  auto r = LoadFashionMnist(dir_, FashionMnistSplit::kTest);
  ExpectError(r, StatusCode::kNotFound, FashionMnistLabelsPath(dir_, FashionMnistSplit::kTest),
              {"dataset-fashion-mnist"});
  const std::string labels = Gz("l.gz", LabelsIdx(2));
  const std::string images = dir_ + "/no-such-images.gz";
  ExpectError(ReadFashionMnistFiles(images, labels), StatusCode::kNotFound, images);
}

// Images whose first two pixels give their index (low byte, high byte).
Bytes NumberedImagesIdx(uint32_t count) {
  Bytes b = ImagesIdx(count);
  for (uint32_t k = 0; k < count; ++k) {
    b[16 + k * 784] = static_cast<uint8_t>(k & 255);
    b[16 + k * 784 + 1] = static_cast<uint8_t>(k >> 8);
  }
  return b;
}

void ExpectSameDataset(const Dataset& got, const Dataset& want) {
  EXPECT_EQ(got.n, want.n);
  EXPECT_EQ(got.dims, want.dims);
  EXPECT_EQ(got.num_classes, want.num_classes);
  EXPECT_EQ(got.x, want.x);
  EXPECT_EQ(got.y, want.y);
}

// A share read from the files is the partition of the whole set, also
// across the reader's reads of whole images (2000 images span two).
TEST_F(IdxFilesTest, AShareIsThePartitionOfTheWholeFiles) {
  const std::string images = Gz("i.gz", NumberedImagesIdx(2000));
  const std::string labels = Gz("l.gz", LabelsIdx(2000));
  auto all = ReadFashionMnistFiles(images, labels);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  for (const auto& [w, of] : std::vector<std::pair<int, int>>{{0, 1}, {0, 3}, {2, 3}, {6, 7}, {1999, 2000}}) {
    SCOPED_TRACE("worker " + std::to_string(w) + " of " + std::to_string(of));
    auto share = ReadFashionMnistShare(images, labels, w, of);
    ASSERT_TRUE(share.ok()) << share.status().ToString();
    auto want = PartitionDataset(*all, w, of);
    ASSERT_TRUE(want.ok());
    ExpectSameDataset(*share, *want);
    // The first pixels name the examples kept: w, w + of, ...
    EXPECT_FLOAT_EQ(share->x[0] * 255.0f, static_cast<float>(w & 255));
    if (share->n > 1) {
      EXPECT_FLOAT_EQ(share->x[784] * 255.0f, static_cast<float>((w + of) & 255));
    }
  }
}

// A share still reads and checks the whole files: damage outside it is
// DataLoss, and its own errors are PartitionDataset's.
TEST_F(IdxFilesTest, AShareStillChecksTheWholeFiles) {
  Bytes short_images = ImagesIdx(4);
  short_images.resize(16 + 3 * 784 + 10);  // the last image, which worker 0 of 2 skips, is cut
  const std::string cut = Gz("cut.gz", short_images);
  ExpectError(ReadFashionMnistShare(cut, Gz("l.gz", LabelsIdx(4)), 0, 2), StatusCode::kDataLoss, cut,
              {"truncated"});
  Bytes extra = ImagesIdx(4);
  extra.push_back(0);
  const std::string trailing = Gz("trailing.gz", extra);
  ExpectError(ReadFashionMnistShare(trailing, Gz("l2.gz", LabelsIdx(4)), 1, 2), StatusCode::kDataLoss,
              trailing, {"trailing"});
  Bytes bad = LabelsIdx(4);
  bad[8 + 1] = 10;  // index 1, which worker 0 of 2 skips
  const std::string labels = Gz("bad.gz", bad);
  ExpectError(ReadFashionMnistShare(Gz("i3.gz", ImagesIdx(4)), labels, 0, 2), StatusCode::kDataLoss, labels,
              {"index 1"});
  const std::string images = Gz("i4.gz", ImagesIdx(4));
  ExpectError(ReadFashionMnistShare(images, Gz("l4.gz", LabelsIdx(3)), 0, 2), StatusCode::kDataLoss, images,
              {"4 images", "3 labels"});
  const std::string three = Gz("i5.gz", ImagesIdx(3));
  const std::string three_labels = Gz("l5.gz", LabelsIdx(3));
  for (const auto& [w, of] : std::vector<std::pair<int, int>>{{2, 2}, {0, 0}, {-1, 2}}) {
    EXPECT_EQ(ReadFashionMnistShare(three, three_labels, w, of).status().code(), StatusCode::kInvalidArgument);
  }
  auto empty = ReadFashionMnistShare(three, three_labels, 4, 5);
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(empty.status().message().find("leaves worker 4 of 5 nothing"), std::string::npos)
      << empty.status().ToString();
}

bool HaveRealData() {
  return std::filesystem::exists(FashionMnistImagesPath(kFashionMnistDir, FashionMnistSplit::kTrain));
}

TEST(FashionMnistTest, LoadsTheInstalledPackage) {
  if (!HaveRealData()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  auto train = LoadFashionMnist(kFashionMnistDir, FashionMnistSplit::kTrain);
  ASSERT_TRUE(train.ok()) << train.status().ToString();
  auto test = LoadFashionMnist(kFashionMnistDir, FashionMnistSplit::kTest);
  ASSERT_TRUE(test.ok()) << test.status().ToString();
  EXPECT_EQ(train->n, 60000);
  EXPECT_EQ(test->n, 10000);
  for (const Dataset* d : {&*train, &*test}) {
    EXPECT_EQ(d->dims, 784);
    EXPECT_EQ(d->x.size(), static_cast<size_t>(d->n) * 784);
    std::vector<int64_t> per_class(10, 0);
    for (int32_t y : d->y) {
      ASSERT_TRUE(y >= 0 && y < 10);
      ++per_class[y];
    }
    for (int64_t c : per_class) EXPECT_EQ(c, d->n / 10);  // both splits are balanced
    float lo = 1.0f, hi = 0.0f;
    for (float v : d->x) {
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
    EXPECT_EQ(lo, 0.0f);
    EXPECT_EQ(hi, 1.0f);
  }
  // What a worker trains on: its share, read without converting the rest.
  auto share = LoadFashionMnistShare(kFashionMnistDir, FashionMnistSplit::kTrain, 4, 5);
  ASSERT_TRUE(share.ok()) << share.status().ToString();
  auto want = PartitionDataset(*train, 4, 5);
  ASSERT_TRUE(want.ok());
  ExpectSameDataset(*share, *want);
}

// Example i has feature value i, so batches show which examples they hold.
Dataset Numbered(int64_t n) {
  Dataset d;
  d.n = n;
  d.dims = 1;
  d.num_classes = 1;
  for (int64_t i = 0; i < n; ++i) {
    d.x.push_back(static_cast<float>(i));
    d.y.push_back(0);
  }
  return d;
}

TEST(PartitionTest, SharesAreDisjointAndCoverTheSet) {
  const Dataset all = Numbered(10);
  std::multiset<float> seen;
  std::vector<int64_t> sizes;
  for (int w = 0; w < 3; ++w) {
    auto part = PartitionDataset(all, w, 3);
    ASSERT_TRUE(part.ok()) << part.status().ToString();
    sizes.push_back(part->n);
    for (float v : part->x) seen.insert(v);
    auto again = PartitionDataset(all, w, 3);
    EXPECT_EQ(again->x, part->x);  // deterministic
  }
  EXPECT_EQ(sizes, (std::vector<int64_t>{4, 3, 3}));
  EXPECT_EQ(seen, std::multiset<float>(all.x.begin(), all.x.end()));
  EXPECT_EQ(PartitionDataset(all, 3, 3).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(PartitionDataset(all, 0, 0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(PartitionDataset(all, 11, 12).status().code(), StatusCode::kInvalidArgument);
}

std::vector<float> Take(BatchSampler& s, int batches) {
  std::vector<float> out;
  for (int i = 0; i < batches; ++i) {
    Batch b = s.Next();
    out.insert(out.end(), b.x, b.x + b.n);
  }
  return out;
}

TEST(BatchSamplerTest, EachEpochVisitsDistinctExamplesInAFreshOrder) {
  const Dataset data = Numbered(103);
  auto s = BatchSampler::Create(&data, 10, 1, 0);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->batches_per_epoch(), 10);
  std::vector<float> e0 = Take(*s, 10);
  EXPECT_EQ((s->position()), (DataPosition{1, 0}));
  std::vector<float> e1 = Take(*s, 10);
  EXPECT_EQ(std::set<float>(e0.begin(), e0.end()).size(), 100u);
  EXPECT_EQ(std::set<float>(e1.begin(), e1.end()).size(), 100u);
  EXPECT_NE(e0, e1);
  auto other_worker = BatchSampler::Create(&data, 10, 1, 1);
  auto other_seed = BatchSampler::Create(&data, 10, 2, 0);
  EXPECT_NE(Take(*other_worker, 10), e0);
  EXPECT_NE(Take(*other_seed, 10), e0);
  auto same = BatchSampler::Create(&data, 10, 1, 0);
  EXPECT_EQ(Take(*same, 10), e0);
}

TEST(BatchSamplerTest, ResumesFromASavedPosition) {
  const Dataset data = Numbered(50);
  auto s = BatchSampler::Create(&data, 8, 99, 3);
  ASSERT_TRUE(s.ok());
  Take(*s, 9);  // into the second epoch (6 batches per epoch)
  const DataPosition saved = s->position();
  EXPECT_EQ(saved, (DataPosition{1, 24}));
  const std::vector<float> expected = Take(*s, 10);
  auto resumed = BatchSampler::Create(&data, 8, 99, 3, saved);
  ASSERT_TRUE(resumed.ok()) << resumed.status().ToString();
  EXPECT_EQ(Take(*resumed, 10), expected);
  ASSERT_TRUE(s->Seek(saved).ok());
  EXPECT_EQ(Take(*s, 10), expected);

  EXPECT_EQ(s->Seek(DataPosition{-1, 0}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s->Seek(DataPosition{0, 51}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(BatchSampler::Create(&data, 51, 1, 0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(BatchSampler::Create(&data, 0, 1, 0).status().code(), StatusCode::kInvalidArgument);
}

TEST(FashionMnistTrainingTest, CpuMlpReaches80PercentTestAccuracyInOneEpoch) {
  if (!HaveRealData()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const auto start = std::chrono::steady_clock::now();
  auto train = LoadFashionMnist(kFashionMnistDir, FashionMnistSplit::kTrain);
  auto test = LoadFashionMnist(kFashionMnistDir, FashionMnistSplit::kTest);
  ASSERT_TRUE(train.ok() && test.ok());
  const MlpShape shape{{784, 128, 10}};
  auto spec = MlpModelSpec(shape, kDefaultChunkBytes, 1);
  ASSERT_TRUE(spec.ok());
  std::vector<std::vector<float>> params = InitialTables(*spec), deltas = params;
  std::vector<const float*> in;
  std::vector<float*> out;
  for (size_t t = 0; t < params.size(); ++t) {
    in.push_back(params[t].data());
    out.push_back(deltas[t].data());
  }
  auto backend = NewCpuBackend(shape, 1);
  ASSERT_TRUE(backend.ok());
  auto sampler = BatchSampler::Create(&*train, 64, 1, 0);
  ASSERT_TRUE(sampler.ok());
  const auto loaded = std::chrono::steady_clock::now();
  for (int64_t step = 0; step < sampler->batches_per_epoch(); ++step) {
    auto stats = (*backend)->TrainStep(in, sampler->Next(), 0.1f, out);
    ASSERT_TRUE(stats.ok()) << stats.status().ToString();
    for (size_t t = 0; t < params.size(); ++t) {
      for (size_t k = 0; k < params[t].size(); ++k) params[t][k] += deltas[t][k];
    }
  }
  auto eval = (*backend)->Evaluate(in, test->AsBatch());
  ASSERT_TRUE(eval.ok()) << eval.status().ToString();
  const auto end = std::chrono::steady_clock::now();
  const double load_s = std::chrono::duration<double>(loaded - start).count();
  const double train_s = std::chrono::duration<double>(end - loaded).count();
  std::printf("[ info     ] 784-128-10, 1 epoch, batch 64: load %.2f s, train+eval %.2f s, "
              "test loss %.4f, accuracy %.4f\n",
              load_s, train_s, eval->loss, eval->accuracy);
  RecordProperty("test_accuracy", std::to_string(eval->accuracy));
  RecordProperty("train_seconds", std::to_string(train_s));
  EXPECT_GE(eval->accuracy, 0.80);
}

}  // namespace
}  // namespace geops::worker
