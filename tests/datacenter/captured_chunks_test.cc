// CapturedChunks: a commit's chunks read as they were at the capture, though
// writes go on while the commit is written.
#include "datacenter/captured_chunks.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "tests/datacenter/shard_test_util.h"

namespace geops::datacenter {
namespace {

std::vector<float> Values(const ChunkStore& store, int64_t local) {
  std::vector<float> v(store.elements(local));
  store.Read(local, v.data());
  return v;
}

void AddEverywhere(ChunkStore* store, int64_t local, float delta) {
  std::vector<float> d(store->elements(local), delta);
  store->Add(local, d.data());
}

TEST(CapturedChunksTest, ReadsTheCapturedValuesWhetherOrNotAWriteCameFirst) {
  const ModelSpec spec = testing::TestModel(InitKind::kNormal);
  auto store = std::move(ChunkStore::Create(&spec, 0, 1)).value();
  ASSERT_GE(store->num_chunks(), 3);
  CapturedChunks captured(store.get());
  std::vector<std::vector<float>> at_capture;
  for (int64_t i = 0; i < 3; ++i) at_capture.push_back(Values(*store, i));

  captured.Capture({0, 1, 2});
  ASSERT_EQ(captured.size(), 3u);
  AddEverywhere(store.get(), 1, 5.0f);  // written before the store reads it: saved first
  AddEverywhere(store.get(), 1, 1.0f);  // a second write saves nothing more
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(captured.key(i), store->key(static_cast<int64_t>(i)));
    std::vector<float> out(captured.elements(i));
    captured.Read(i, out.data());
    EXPECT_EQ(out, at_capture[i]) << "chunk " << i;
  }
  AddEverywhere(store.get(), 2, 1.0f);  // already read: nothing to keep
  captured.Release();
  EXPECT_EQ(captured.stats().chunks_saved, 1);
  EXPECT_EQ(captured.stats().peak_saved_bytes, store->elements(1) * int64_t{sizeof(float)});
  EXPECT_EQ(Values(*store, 1)[0], at_capture[1][0] + 6.0f);
}

TEST(CapturedChunksTest, ReleaseForgetsWhatTheStoreDidNotRead) {
  const ModelSpec spec = testing::TestModel(InitKind::kZeros);
  auto store = std::move(ChunkStore::Create(&spec, 0, 1)).value();
  CapturedChunks captured(store.get());
  captured.Capture({0, 1});
  AddEverywhere(store.get(), 0, 2.0f);
  captured.Release();  // a failed commit: neither chunk read
  AddEverywhere(store.get(), 0, 2.0f);
  AddEverywhere(store.get(), 1, 2.0f);
  EXPECT_EQ(captured.stats().chunks_saved, 1) << "a released chunk was saved again";
  // The next capture starts from the live values.
  captured.Capture({0});
  std::vector<float> out(captured.elements(0));
  captured.Read(0, out.data());
  EXPECT_EQ(out, std::vector<float>(out.size(), 4.0f));
  captured.Release();
}

TEST(CapturedChunksTest, ConcurrentWritersNeverLeakIntoACapture) {
  const ModelSpec spec = testing::TestModel(InitKind::kZeros);
  auto store = std::move(ChunkStore::Create(&spec, 0, 1)).value();
  CapturedChunks captured(store.get());
  const int64_t n = store->num_chunks();
  std::vector<int64_t> all;
  for (int64_t i = 0; i < n; ++i) all.push_back(i);
  for (int round = 0; round < 50; ++round) {
    // As under the persister's barrier: no write in flight at the capture.
    std::vector<std::vector<float>> at_capture;
    for (int64_t i = 0; i < n; ++i) at_capture.push_back(Values(*store, i));
    captured.Capture(all);
    std::atomic<bool> stop{false};
    std::atomic<bool> started{false};
    std::thread writer([&] {
      for (int64_t i = n - 1; i >= n / 2; --i) AddEverywhere(store.get(), i, 1.0f);  // some before any read
      started.store(true);
      for (int pass = 0; pass < 20 && !stop.load(); ++pass) {
        for (int64_t i = n - 1; i >= 0; --i) AddEverywhere(store.get(), i, 1.0f);
      }
    });
    while (!started.load()) std::this_thread::yield();
    for (size_t i = 0; i < captured.size(); ++i) {
      std::vector<float> out(captured.elements(i));
      captured.Read(i, out.data());
      EXPECT_EQ(out, at_capture[i]) << "round " << round << ", chunk " << i;
      if (out != at_capture[i]) break;  // (the writer is joined below)
    }
    stop.store(true);
    writer.join();
    captured.Release();
    if (::testing::Test::HasFailure()) break;
  }
}

}  // namespace
}  // namespace geops::datacenter
