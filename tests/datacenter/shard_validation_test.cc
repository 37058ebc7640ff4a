// Every malformed or unauthorised request is refused with the right code and
// a clear message, and leaves the shard byte-for-byte as it was.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "datacenter/shard.h"
#include "tests/datacenter/shard_test_util.h"

namespace geops::datacenter {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::MakeShard;
using testing::SameBytes;
using testing::SnapshotOf;
using testing::TestModel;
using testing::TestOptions;

// Shard 0 of 2, two workers; worker 0 registered, worker 1 not.
class ShardValidationTest : public ::testing::Test {
 protected:
  void SetUp() override { Build(TestOptions(2, 2, 0)); }

  void Build(const ShardOptions& options) {
    shard_ = MakeShard(spec_, options);
    ASSERT_NE(shard_, nullptr);
    ASSERT_TRUE(shard_->RegisterWorker(0, spec_.Fingerprint(), options.auth_token).ok());
  }

  // Runs `call`, which must be refused with `code` and a message containing
  // `needle`, and checks that values, clocks and counters (but
  // requests_rejected, which grows by one) did not change.
  void ExpectRefused(const std::function<Status()>& call, StatusCode code, const std::string& needle) {
    const testing::ShardSnapshot before = SnapshotOf(*shard_);
    const ShardStatus st0 = shard_->GetStatus();
    const Status s = call();
    EXPECT_EQ(s.code(), code) << s.ToString();
    EXPECT_THAT(s.message(), HasSubstr(needle));
    EXPECT_TRUE(SameBytes(before, SnapshotOf(*shard_)));
    const ShardStatus st1 = shard_->GetStatus();
    EXPECT_EQ(st1.requests_rejected, st0.requests_rejected + 1);
    EXPECT_EQ(st1.shard_clock, st0.shard_clock);
    EXPECT_EQ(st1.update_batches_applied, st0.update_batches_applied);
    EXPECT_EQ(st1.update_batches_duplicate, st0.update_batches_duplicate);
    ASSERT_EQ(st1.workers.size(), st0.workers.size());
    for (size_t w = 0; w < st0.workers.size(); ++w) {
      EXPECT_EQ(st1.workers[w].clock, st0.workers[w].clock);
      EXPECT_EQ(st1.workers[w].finished, st0.workers[w].finished);
    }
  }

  Status Update(std::vector<ChunkKey> keys, std::vector<float> values, Clock clock = 0, WorkerId w = 0) {
    return shard_->Update(w, clock, keys, values).status();
  }

  Status Read(std::vector<ChunkKey> keys, Clock clock = 0, int64_t staleness = 0, WorkerId w = 0) {
    std::vector<float> out(4096);
    return shard_->Read(w, clock, staleness, keys, out.data(), Deadline::InMs(100)).status();
  }

  // w/0 (64 floats) and w/2 (32 floats), both owned by shard 0.
  static std::vector<ChunkKey> TwoKeys() { return {{0, 0}, {0, 2}}; }

  const ModelSpec spec_ = TestModel();
  std::unique_ptr<Shard> shard_;
};

TEST_F(ShardValidationTest, RefusesUnknownTable) {
  ExpectRefused([&] { return Update({{7, 0}}, std::vector<float>(64)); },
                StatusCode::kInvalidArgument, "unknown table id 7");
  ExpectRefused([&] { return Read({{0, 0}, {9, 0}}); }, StatusCode::kInvalidArgument, "unknown table id 9");
}

TEST_F(ShardValidationTest, RefusesChunkOutOfRange) {
  ExpectRefused([&] { return Update({{0, 4}}, std::vector<float>(64)); }, StatusCode::kInvalidArgument,
                "chunk 4 of table 'w' is out of range (the table has 3 chunks)");
  ExpectRefused([&] { return Read({{2, 16}}); }, StatusCode::kInvalidArgument, "out of range");
}

TEST_F(ShardValidationTest, RefusesChunkOfAnotherShard) {
  ExpectRefused([&] { return Update({{0, 0}, {0, 1}}, std::vector<float>(128)); },
                StatusCode::kInvalidArgument, "chunk 1 of table 'w' belongs to shard 1, not shard 0");
  ExpectRefused([&] { return Read({{1, 0}}); }, StatusCode::kInvalidArgument, "belongs to shard 1");
}

TEST_F(ShardValidationTest, RefusesWrongPayloadSize) {
  ExpectRefused([&] { return Update(TwoKeys(), std::vector<float>(95, 1.0f)); },
                StatusCode::kInvalidArgument, "payload has 95 floats, expected 96");
  ExpectRefused([&] { return Update(TwoKeys(), std::vector<float>(97, 1.0f)); },
                StatusCode::kInvalidArgument, "expected 96");
}

TEST_F(ShardValidationTest, RefusesNonFiniteValuesNamingWhere) {
  struct Case {
    float value;
    const char* kind;
  };
  for (const Case& c : {Case{std::numeric_limits<float>::quiet_NaN(), "NaN"},
                        Case{std::numeric_limits<float>::infinity(), "+Inf"},
                        Case{-std::numeric_limits<float>::infinity(), "-Inf"}}) {
    // The first chunk is clean; the bad value is element 21 of w/2 (row 9,
    // col 5): nothing of the batch may land.
    std::vector<float> values(96, 1.0f);
    values[64 + 21] = c.value;
    ExpectRefused([&] { return Update(TwoKeys(), values); }, StatusCode::kInvalidArgument,
                  std::string("value is ") + c.kind + " in table 'w' chunk 2 element 21 (row 9, col 5)");
  }
  // The refused batches did not take the worker's clock-0 slot (the values
  // are checked in the apply's sum pass, after admission): a clean batch for
  // that clock is applied, not dropped as a duplicate.
  Result<UpdateReply> r = shard_->Update(0, 0, TwoKeys(), std::vector<float>(96, 1.0f));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->applied);
}

TEST_F(ShardValidationTest, RefusesAnUpdateWhoseResultWouldOverflowAndAppliesNothingOfIt) {
  ASSERT_TRUE(shard_->RegisterWorker(1, spec_.Fingerprint(), "").ok());
  // Worker 0 brings w/2 element 3 to 3e38 (finite). The test model starts
  // from small uniform values, so the stored value is 3e38 + a little.
  std::vector<float> big(96, 0.0f);
  big[64 + 3] = 3e38f;
  ASSERT_TRUE(Update(TwoKeys(), big).ok());
  // Worker 1 adds 3e38 to it: each input is finite, the sum is not. The
  // first chunk of the batch (clean) must not land either.
  std::vector<float> also(96, 1.0f);
  also[64 + 3] = 3e38f;
  ExpectRefused([&] { return Update(TwoKeys(), also, 0, 1); }, StatusCode::kInvalidArgument,
                "update of worker 1 at clock 0 refused, nothing applied: table 'w' chunk 2 element 3 would become "
                "inf (stored 3");
  // The refused batch did not take worker 1's clock-0 slot: a corrected
  // batch for that clock is applied, not dropped as a duplicate.
  std::vector<float> fixed(96, 1.0f);
  Result<UpdateReply> r = shard_->Update(1, 0, TwoKeys(), fixed);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->applied);
  // Going down past -max is refused the same way.
  std::vector<float> low(96, 0.0f);
  low[5] = -3e38f;
  ASSERT_TRUE(shard_->AdvanceClock(0, 1, false).ok());
  ASSERT_TRUE(Update(TwoKeys(), low, 1).ok());
  ASSERT_TRUE(shard_->AdvanceClock(1, 1, false).ok());
  ExpectRefused([&] { return Update(TwoKeys(), low, 1, 1); }, StatusCode::kInvalidArgument, "would become -inf");
}

TEST_F(ShardValidationTest, RefusesOversizedBatch) {
  ShardOptions o = TestOptions(2, 2, 0);
  o.max_batch_bytes = 1024;
  Build(o);
  const std::vector<ChunkKey> keys = spec_.ChunksOfShard(0, 2);  // 10 chunks, 2432 bytes
  ExpectRefused([&] { return Update(keys, std::vector<float>(testing::ElementsOf(spec_, keys))); },
                StatusCode::kResourceExhausted, "exceeds max_batch_bytes 1024");
  ExpectRefused([&] { return Read(keys); }, StatusCode::kResourceExhausted, "exceeds max_batch_bytes");
}

TEST_F(ShardValidationTest, RefusesChunkRepeatedInBatch) {
  ExpectRefused([&] { return Update({{0, 0}, {0, 2}, {0, 0}}, std::vector<float>(160)); },
                StatusCode::kInvalidArgument, "chunk 0 of table 'w' appears more than once");
}

TEST_F(ShardValidationTest, RefusesClockJumpOnUpdate) {
  ExpectRefused([&] { return Update(TwoKeys(), std::vector<float>(96), 2); },
                StatusCode::kInvalidArgument, "clock jumps from 0 to 2");
}

TEST_F(ShardValidationTest, RefusesClockJumpOnAdvance) {
  ExpectRefused([&] { return shard_->AdvanceClock(0, 2, false).status(); },
                StatusCode::kInvalidArgument, "clock jumps from 0 to 2");
}

TEST_F(ShardValidationTest, RefusesNegativeClockAndStaleness) {
  ExpectRefused([&] { return Update(TwoKeys(), std::vector<float>(96), -1); },
                StatusCode::kInvalidArgument, "clock must be >= 0, got -1");
  ExpectRefused([&] { return shard_->AdvanceClock(0, -3, false).status(); },
                StatusCode::kInvalidArgument, "got -3");
  ExpectRefused([&] { return Read(TwoKeys(), -1); }, StatusCode::kInvalidArgument, "clock must be >= 0");
  ExpectRefused([&] { return Read(TwoKeys(), 0, -2); }, StatusCode::kInvalidArgument, "staleness");
}

TEST_F(ShardValidationTest, RefusesWorkerIdOutOfRange) {
  for (WorkerId w : {-1, 2, 1000}) {
    const std::string needle = "worker id " + std::to_string(w) + " outside [0, 2)";
    ExpectRefused([&] { return Update(TwoKeys(), std::vector<float>(96), 0, w); },
                  StatusCode::kInvalidArgument, needle);
    ExpectRefused([&] { return Read(TwoKeys(), 0, 0, w); }, StatusCode::kInvalidArgument, needle);
    ExpectRefused([&] { return shard_->AdvanceClock(w, 1, false).status(); },
                  StatusCode::kInvalidArgument, needle);
    ExpectRefused([&] { return shard_->Heartbeat(w); }, StatusCode::kInvalidArgument, needle);
    ExpectRefused([&] { return shard_->RegisterWorker(w, 0, "").status(); },
                  StatusCode::kInvalidArgument, needle);
  }
}

TEST_F(ShardValidationTest, UnregisteredWorkerIsAborted) {
  const std::string needle = "worker 1 is not registered with shard 0; register again";
  ExpectRefused([&] { return Update(TwoKeys(), std::vector<float>(96), 0, 1); },
                StatusCode::kAborted, needle);
  ExpectRefused([&] { return Read(TwoKeys(), 0, kAsync, 1); }, StatusCode::kAborted, needle);
  ExpectRefused([&] { return shard_->AdvanceClock(1, 1, false).status(); }, StatusCode::kAborted, needle);
  ExpectRefused([&] { return shard_->Heartbeat(1); }, StatusCode::kAborted, needle);
}

TEST_F(ShardValidationTest, ShardRestartForgetsRegistrations) {
  EXPECT_TRUE(shard_->Heartbeat(0).ok());
  auto restarted = MakeShard(spec_, TestOptions(2, 2, 0));  // the same shard, a new process
  EXPECT_EQ(restarted->Heartbeat(0).code(), StatusCode::kAborted);
}

TEST_F(ShardValidationTest, RefusesWrongTokenWithoutEchoingIt) {
  ShardOptions o = TestOptions(2, 2, 0);
  o.auth_token = "s3cret-site-token";
  Build(o);
  for (const std::string& bad : {std::string("wrong-guess"), std::string(""), std::string("s3cret-site-toke")}) {
    const testing::ShardSnapshot before = SnapshotOf(*shard_);
    Status s = shard_->RegisterWorker(1, 0, bad).status();
    EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s.ToString();
    EXPECT_THAT(s.message(), HasSubstr("authentication failed"));
    EXPECT_THAT(s.message(), Not(HasSubstr("s3cret")));
    if (!bad.empty()) {
      EXPECT_THAT(s.message(), Not(HasSubstr(bad)));
    }
    EXPECT_TRUE(SameBytes(before, SnapshotOf(*shard_)));
  }
  // Still unregistered after the refusals.
  EXPECT_EQ(shard_->Heartbeat(1).code(), StatusCode::kAborted);
  EXPECT_EQ(shard_->GetStatus().requests_rejected, 4);
  EXPECT_TRUE(shard_->RegisterWorker(1, 0, "s3cret-site-token").ok());
}

TEST_F(ShardValidationTest, RefusesFingerprintMismatchNamingBoth) {
  const uint64_t ours = spec_.Fingerprint();
  const uint64_t theirs = ours ^ 0xff;
  char want[24], got[24];
  std::snprintf(want, sizeof(want), "0x%016llx", static_cast<unsigned long long>(ours));
  std::snprintf(got, sizeof(got), "0x%016llx", static_cast<unsigned long long>(theirs));
  ExpectRefused([&] { return shard_->RegisterWorker(1, theirs, "").status(); },
                StatusCode::kFailedPrecondition, "model fingerprint mismatch");
  Status s = shard_->RegisterWorker(1, theirs, "").status();
  EXPECT_THAT(s.message(), HasSubstr(want));
  EXPECT_THAT(s.message(), HasSubstr(got));
  Result<RegisterReply> zero = shard_->RegisterWorker(1, 0, "");  // 0 skips the check
  ASSERT_TRUE(zero.ok());
  EXPECT_EQ(zero->model_fingerprint, ours);
  EXPECT_TRUE(shard_->RegisterWorker(1, ours, "").ok());
}

TEST_F(ShardValidationTest, FinishedWorkerCannotPushOrAdvance) {
  ASSERT_TRUE(shard_->AdvanceClock(0, 1, true).ok());
  ExpectRefused([&] { return Update(TwoKeys(), std::vector<float>(96), 1); },
                StatusCode::kFailedPrecondition, "worker 0 finished at clock 1");
  ExpectRefused([&] { return shard_->AdvanceClock(0, 2, false).status(); },
                StatusCode::kFailedPrecondition, "finished at clock 1");
  EXPECT_TRUE(shard_->AdvanceClock(0, 1, true).ok());  // the finishing call retried
  ASSERT_TRUE(shard_->RegisterWorker(0, 0, "").ok());  // re-registering continues
  EXPECT_TRUE(shard_->Update(0, 1, TwoKeys(), std::vector<float>(96, 1.0f))->applied);
  EXPECT_TRUE(shard_->AdvanceClock(0, 2, false).ok());
}

}  // namespace
}  // namespace geops::datacenter
