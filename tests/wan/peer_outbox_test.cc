#include "wan/replication/peer_outbox.h"
#include "wan/replication/stream_reset.h"

#include <gtest/gtest.h>

#include <map>
#include <vector>

namespace geops::wan {
namespace {

SparseChunkUpdate Dense(ChunkKey key, std::vector<float> v) {
  SparseChunkUpdate u;
  u.key = key;
  u.num_elements = static_cast<uint32_t>(v.size());
  for (uint32_t i = 0; i < v.size(); ++i) {
    if (v[i] == 0) continue;
    u.indices.push_back(i);
    u.values.push_back(v[i]);
  }
  return u;
}

// Sums every batch's decoded values per (chunk, element).
void AddDecoded(const WanBatch& b, std::map<std::pair<uint64_t, uint32_t>, double>* sum) {
  BatchDecoder d;
  DecodedBatch out;
  ASSERT_TRUE(d.Decode(b.payload, &out).ok());
  for (const SparseChunkUpdate& u : out.chunks) {
    for (size_t i = 0; i < u.indices.size(); ++i) (*sum)[{u.key.Packed(), u.indices[i]}] += u.values[i];
  }
}

TEST(PeerOutboxTest, BacklogCoalescesAndCutsMostSignificantChunksFirst) {
  auto out = PeerOutbox::Create(1, {});
  ASSERT_TRUE(out.ok());
  // Three chunks of 256 floats; chunk 1 changes most relative to w = 1.
  std::vector<SparseChunkUpdate> updates;
  for (ChunkId c = 0; c < 3; ++c) {
    std::vector<float> v(256, c == 1 ? 0.5f : 0.01f);
    updates.push_back(Dense({0, c}, v));
  }
  ASSERT_TRUE(out->AddToBacklog(updates).ok());
  ASSERT_TRUE(out->AddToBacklog(updates).ok());  // the same chunks again: they coalesce
  EXPECT_EQ(out->backlog().dirty_chunks(), 3);
  std::vector<float> ones(256, 1.0f);
  ChunkValueLookup lookup = [&](ChunkKey) { return ones.data(); };
  BacklogCut cut;
  cut.origin = 7;
  cut.clock = 3;
  cut.codec = ValueCodec::kFp32;
  cut.budget_bytes = 1400;  // about one chunk of 256 fp32 values
  cut.lookup = &lookup;
  std::vector<ChunkKey> keys;
  auto b = out->CutFromBacklog(cut, &keys);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  ASSERT_TRUE(b->has_value());
  EXPECT_EQ(keys, (std::vector<ChunkKey>{{0, 1}}));
  EXPECT_EQ((*b)->seq, 1u);
  EXPECT_EQ(out->inflight(), 1);
  EXPECT_EQ(out->stats().backlog_trimmed, 1);
  EXPECT_EQ(out->backlog().dirty_chunks(), 2);  // the other two wait
  std::map<std::pair<uint64_t, uint32_t>, double> sum;
  AddDecoded(**b, &sum);
  EXPECT_DOUBLE_EQ((sum[{ChunkKey{0, 1}.Packed(), 7}]), 1.0);  // 0.5 + 0.5, coalesced
  out->OnAcked(1);
  EXPECT_EQ(out->inflight(), 0);
}

TEST(PeerOutboxTest, LossyCutsKeepResidualsSoNothingIsLost) {
  auto out = PeerOutbox::Create(2, {});
  ASSERT_TRUE(out.ok());
  std::vector<float> v(300);
  for (size_t i = 0; i < v.size(); ++i) v[i] = 0.001f * static_cast<float>(i % 17) - 0.007f;
  std::vector<SparseChunkUpdate> updates = {Dense({1, 4}, v)};
  ASSERT_TRUE(out->AddToBacklog(updates).ok());
  std::map<std::pair<uint64_t, uint32_t>, double> sum;
  BacklogCut cut;
  cut.codec = ValueCodec::kInt8;
  cut.threshold = -1;  // everything
  std::vector<ChunkKey> keys;
  for (int round = 0; round < 50 && out->backlogged(); ++round) {
    auto b = out->CutFromBacklog(cut, &keys);
    ASSERT_TRUE(b.ok());
    if (!b->has_value()) break;
    AddDecoded(**b, &sum);
  }
  std::span<const float> left = out->backlog().Accumulated({1, 4});
  for (uint32_t i = 0; i < v.size(); ++i) {
    const double shipped = sum.count({ChunkKey{1, 4}.Packed(), i}) ? sum[{ChunkKey{1, 4}.Packed(), i}] : 0.0;
    EXPECT_NEAR(shipped + (left.empty() ? 0.0 : left[i]), v[i], 1e-7) << i;
  }
}

// A limited cut takes a bounded run of chunks, the next one goes on after
// it (wrapping around), and every value leaves exactly once.
TEST(PeerOutboxTest, LimitedCutsMoveOnThroughTheBacklogAndLoseNothing) {
  auto out = PeerOutbox::Create(1, {});
  ASSERT_TRUE(out.ok());
  std::vector<SparseChunkUpdate> updates;
  for (ChunkId c = 0; c < 10; ++c) updates.push_back(Dense({0, c}, std::vector<float>(256, 1.0f + c)));
  ASSERT_TRUE(out->AddToBacklog(updates).ok());
  BacklogCut cut;
  cut.codec = ValueCodec::kFp32;
  cut.max_elements = 600;  // three chunks of 256 (the chunk crossing it is taken whole)
  std::map<std::pair<uint64_t, uint32_t>, double> sum;
  std::vector<ChunkKey> keys;
  std::vector<ChunkKey> seen;
  int cuts = 0;
  while (out->backlogged() && cuts < 20) {
    auto b = out->CutFromBacklog(cut, &keys);
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    ASSERT_TRUE(b->has_value());
    EXPECT_LE(keys.size(), 3u);
    seen.insert(seen.end(), keys.begin(), keys.end());
    AddDecoded(**b, &sum);
    ++cuts;
  }
  EXPECT_EQ(cuts, 4);  // 3 + 3 + 3 + 1 chunks
  std::vector<ChunkKey> all;
  for (ChunkId c = 0; c < 10; ++c) all.push_back({0, c});
  EXPECT_EQ(seen, all);
  for (ChunkId c = 0; c < 10; ++c) {
    for (uint32_t i = 0; i < 256; ++i) EXPECT_EQ((sum[{ChunkKey{0, c}.Packed(), i}]), 1.0 + c);
  }
}

// A cut that looks only at what came since the last one still finds what
// the last cut put back to keep within its budget.
TEST(PeerOutboxTest, WhatACutPutsBackTheNextCutLooksAtAgain) {
  auto out = PeerOutbox::Create(1, {});
  ASSERT_TRUE(out.ok());
  std::vector<SparseChunkUpdate> updates;
  for (ChunkId c = 0; c < 3; ++c) updates.push_back(Dense({0, c}, std::vector<float>(256, 0.5f + 0.1f * c)));
  ASSERT_TRUE(out->AddToBacklog(updates).ok());
  std::vector<float> ones(256, 1.0f);
  ChunkValueLookup lookup = [&](ChunkKey) { return ones.data(); };
  BacklogCut cut;
  cut.codec = ValueCodec::kFp32;
  cut.threshold = 0.1f;
  cut.budget_bytes = 1400;  // about one chunk of 256 fp32 values
  cut.lookup = &lookup;
  cut.revisit = 1000000;    // no whole look within this test
  std::vector<ChunkKey> seen;
  std::vector<ChunkKey> keys;
  for (int i = 0; i < 3; ++i) {
    auto b = out->CutFromBacklog(cut, &keys);
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    ASSERT_TRUE(b->has_value()) << "cut " << i;
    ASSERT_EQ(keys.size(), 1u);
    seen.push_back(keys[0]);
  }
  // Most significant first, each chunk once.
  EXPECT_EQ(seen, (std::vector<ChunkKey>{{0, 2}, {0, 1}, {0, 0}}));
  auto none = out->CutFromBacklog(cut, &keys);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
}

// SentThrough: while updates given at a clock wait in the backlog, the
// outbox has sent everything only through the clock before; a cut that
// leaves chunks behind for the budget does not change that, one that takes
// everything significant does.
TEST(PeerOutboxTest, SentThroughStaysBeforeWhatWaitsInTheBacklog) {
  auto out = PeerOutbox::Create(1, {});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->SentThrough(4), 4);  // nothing given yet
  std::vector<SparseChunkUpdate> updates;
  for (ChunkId c = 0; c < 3; ++c) updates.push_back(Dense({0, c}, std::vector<float>(256, 0.5f + 0.1f * c)));
  ASSERT_TRUE(out->AddToBacklog(updates).ok());
  out->NotePending(5);
  ASSERT_TRUE(out->AddToBacklog(updates).ok());
  out->NotePending(6);  // the oldest waiting updates are still clock 5's
  EXPECT_EQ(out->SentThrough(7), 4);
  std::vector<float> ones(256, 1.0f);
  ChunkValueLookup lookup = [&](ChunkKey) { return ones.data(); };
  BacklogCut cut;
  cut.clock = 7;
  cut.codec = ValueCodec::kFp32;
  cut.threshold = 0.1f;
  cut.budget_bytes = 1400;  // about one chunk of 256 fp32 values: two wait
  cut.lookup = &lookup;
  std::vector<ChunkKey> keys;
  auto trimmed = out->CutFromBacklog(cut, &keys);
  ASSERT_TRUE(trimmed.ok()) << trimmed.status().ToString();
  ASSERT_TRUE(trimmed->has_value());
  EXPECT_EQ(out->SentThrough(7), 4);
  cut.budget_bytes = 0;  // no budget: the rest goes
  auto rest = out->CutFromBacklog(cut, &keys);
  ASSERT_TRUE(rest.ok()) << rest.status().ToString();
  ASSERT_TRUE(rest->has_value());
  EXPECT_EQ(keys.size(), 2u);
  EXPECT_EQ(out->SentThrough(7), 7);
  EXPECT_EQ(out->SentThrough(9), 9);
}

TEST(PeerOutboxTest, NothingToCutGivesNoBatch) {
  auto out = PeerOutbox::Create(1, {});
  ASSERT_TRUE(out.ok());
  std::vector<ChunkKey> keys;
  auto b = out->CutFromBacklog(BacklogCut{}, &keys);
  ASSERT_TRUE(b.ok());
  EXPECT_FALSE(b->has_value());
  EXPECT_EQ(out->last_seq(), 0u);
}

// A peer lost its store: the stream to it starts over at seq 1 with nothing
// in flight, and its backlog becomes exactly this site's selected mass (own
// mass minus what the accumulator still holds), whatever it held before.
TEST(PeerOutboxTest, AcknowledgementsTimeTheRoundTrip) {
  auto out = PeerOutbox::Create(1, {});
  ASSERT_TRUE(out.ok());
  const SteadyClock::time_point t0 = SteadyClock::now();
  EXPECT_EQ(out->ack_seconds(), 0.0);
  EXPECT_FALSE(out->AcknowledgesWithinAClock(4, 0.015));  // nothing timed yet
  out->OnSent(1, 100, 10);
  out->StampSent(1, t0);
  out->OnAcked(1, t0 + std::chrono::milliseconds(10));
  EXPECT_NEAR(out->ack_seconds(), 0.010, 1e-9);
  // An untimed batch (restored, say) or acknowledgement adds no sample.
  out->OnSent(2, 100, 10);
  out->OnAcked(2, t0 + std::chrono::milliseconds(500));
  out->OnSent(3, 100, 10);
  out->StampSent(3, t0);
  out->OnAcked(3);
  EXPECT_NEAR(out->ack_seconds(), 0.010, 1e-9);
  EXPECT_EQ(out->inflight(), 0);
  // A later sample moves the average an eighth of the way.
  out->OnSent(4, 100, 10);
  out->StampSent(4, t0);
  out->OnAcked(4, t0 + std::chrono::milliseconds(20));
  EXPECT_NEAR(out->ack_seconds(), 0.01125, 1e-9);
  // Back within 11 ms: at 15 ms a clock the link acknowledges within a
  // clock; at 10 ms a clock it does not.
  EXPECT_TRUE(out->AcknowledgesWithinAClock(4, 0.015));
  EXPECT_FALSE(out->AcknowledgesWithinAClock(4, 0.010));
  EXPECT_FALSE(out->AcknowledgesWithinAClock(0, 0.015));  // no window: no openings to count
}

TEST(PeerOutboxTest, CutsWithinRevisitClocksLookAtAChunkWholeOnlyOnce) {
  // A fast link asks for many cuts at one clock; with revisit_clocks the
  // chunk is read whole once, not at every revisit-th cut.
  const auto whole_looks = [](int64_t revisit_clocks) {
    auto out = PeerOutbox::Create(1, {});
    EXPECT_TRUE(out.ok());
    std::vector<float> ones(256, 1.0f);
    ChunkValueLookup lookup = [&](ChunkKey) { return ones.data(); };
    BacklogCut cut;
    cut.codec = ValueCodec::kFp32;
    cut.threshold = 0.1f;
    cut.lookup = &lookup;
    cut.revisit = 2;
    cut.revisit_clocks = revisit_clocks;
    cut.clock = 5;
    std::vector<float> small(256, 0.0f);
    small[3] = 0.01f;  // never significant: the chunk stays dirty
    std::vector<SparseChunkUpdate> updates = {Dense({0, 0}, small)};
    EXPECT_TRUE(out->AddToBacklog(updates).ok());
    int64_t wholes = 0;
    std::vector<ChunkKey> keys;
    for (int i = 0; i < 16; ++i) {
      const int64_t before = out->stats().backlog_elements_scanned;
      auto b = out->CutFromBacklog(cut, &keys);
      EXPECT_TRUE(b.ok());
      EXPECT_FALSE(b->has_value());
      if (out->stats().backlog_elements_scanned - before == 256) ++wholes;
    }
    EXPECT_EQ(out->backlog().dirty_chunks(), 1);
    return wholes;
  };
  EXPECT_EQ(whole_looks(0), 8);  // every second cut
  EXPECT_EQ(whole_looks(4), 1);  // once within 4 clocks
}

TEST(StreamResetTest, RestartStreamStartsOverFromTheSelectedMass) {
  auto out = PeerOutbox::Create(4, {});
  ASSERT_TRUE(out.ok());
  out->OnSent(out->AssignSeq(), 100, 3);
  out->OnSent(out->AssignSeq(), 100, 3);
  ASSERT_TRUE(out->AddToBacklog(std::vector<SparseChunkUpdate>{Dense({0, 0}, {9, 9, 9})}).ok());
  ASSERT_EQ(out->inflight(), 2);

  const std::vector<ChunkMass> own = {{{0, 0}, {1.0f, 2.0f, 3.0f}}, {{0, 1}, {0.5f, 0.0f, -4.0f}}};
  const std::vector<float> acc0 = {1.0f, 0.5f, 0.0f};  // chunk (0, 0) still partly unselected
  OutboundJournal journal;  // not enabled: records nothing
  const int64_t put = RestartStream(
      &*out, own,
      [&](ChunkKey key) { return key == ChunkKey{0, 0} ? std::span<const float>(acc0) : std::span<const float>(); },
      77, &journal, 0);
  EXPECT_EQ(put, 4);  // (0,0): 1.5 and 3; (0,1): 0.5 and -4
  EXPECT_EQ(out->inflight(), 0);
  EXPECT_EQ(out->last_seq(), 0u);
  EXPECT_EQ(out->AssignSeq(), 1u);
  std::span<const float> b0 = out->backlog().Accumulated({0, 0});
  std::span<const float> b1 = out->backlog().Accumulated({0, 1});
  ASSERT_EQ(b0.size(), 3u);
  ASSERT_EQ(b1.size(), 3u);
  EXPECT_EQ(std::vector<float>(b0.begin(), b0.end()), (std::vector<float>{0.0f, 1.5f, 3.0f}));
  EXPECT_EQ(std::vector<float>(b1.begin(), b1.end()), (std::vector<float>{0.5f, 0.0f, -4.0f}));
}

}  // namespace
}  // namespace geops::wan
