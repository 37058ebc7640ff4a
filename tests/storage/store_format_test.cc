// The ledger's encodings in store_format.h and the merge operator that adds
// them together: round trips, byte layouts, and hostile bytes that must come
// back as DataLoss naming the problem rather than crash or misread.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <rocksdb/merge_operator.h>

#include <cmath>
#include <cstring>
#include <deque>
#include <limits>
#include <string>
#include <vector>

#include "storage/ledger_merge_operator.h"
#include "storage/store_format.h"

namespace geops::storage {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

LedgerAdd Add(std::vector<uint32_t> indices, std::vector<float> values, uint32_t num_elements = 8,
              SiteId origin = 3, ChunkKey key = {1, 2}) {
  return LedgerAdd{origin, key, num_elements, std::move(indices), std::move(values)};
}

std::string Encoded(const LedgerAdd& add) {
  std::string out = "left over from before";  // replaced, not appended to
  format::EncodeLedgerAdd(add, &out);
  return out;
}

template <typename T>
std::string Bytes(T v) {
  std::string out(sizeof(T), '\0');
  std::memcpy(out.data(), &v, sizeof(T));
  return out;
}

// A sparse add built by hand: tag, num_elements, count, then the pairs.
std::string RawAdd(uint32_t num_elements, uint32_t count, const std::vector<std::pair<uint32_t, float>>& pairs) {
  std::string out(1, static_cast<char>(format::kLedgerAddTag));
  out += Bytes(num_elements) + Bytes(count);
  for (const auto& [index, value] : pairs) out += Bytes(index) + Bytes(value);
  return out;
}

Result<std::vector<double>> Sum(const std::vector<std::string>& entries) {
  format::LedgerSums sums;
  for (const std::string& e : entries) GEOPS_RETURN_IF_ERROR(format::AddLedgerEntry(e, &sums));
  return sums.values;
}

TEST(StoreFormatTest, LedgerKeysGroupAnOriginsRowsInChunkOrder) {
  const std::string a = format::LedgerKey(1, {0, 5});
  const std::string b = format::LedgerKey(1, {0, 256});
  const std::string c = format::LedgerKey(1, {1, 0});
  const std::string d = format::LedgerKey(2, {0, 0});
  EXPECT_EQ(a.size(), format::kLedgerKeySize);
  EXPECT_EQ(a, std::string("\0\0\0\1\0\0\0\0\0\0\0\5", 12));  // all big-endian
  EXPECT_LT(a, b);
  EXPECT_LT(b, c);
  EXPECT_LT(c, d);
  const format::KeyRange one = format::LedgerOriginRange(1);
  for (const std::string& k : {a, b, c}) {
    EXPECT_LE(one.begin, k);
    EXPECT_LT(k, one.end);
  }
  EXPECT_GE(d, one.end);
  EXPECT_LT(format::LedgerKey(0, {~0u, ~0u}), one.begin);
  // The largest origin still has an end above all of its keys.
  const SiteId last = std::numeric_limits<SiteId>::max();
  EXPECT_LT(format::LedgerKey(last, {~0u, ~0u}), format::LedgerOriginRange(last).end);

  SiteId origin = 0;
  ChunkKey key;
  ASSERT_TRUE(format::DecodeLedgerKey(c, &origin, &key));
  EXPECT_EQ(origin, 1);
  EXPECT_EQ(key, (ChunkKey{1, 0}));
  EXPECT_FALSE(format::DecodeLedgerKey(c.substr(1), &origin, &key));
  EXPECT_FALSE(format::DecodeLedgerKey(c + "x", &origin, &key));
  EXPECT_EQ(format::DescribeLedgerRow(3, {0, 7}), "ledger of origin 3, chunk (table 0, chunk 7)");
}

TEST(StoreFormatTest, SparseAddLayout) {
  const std::string e = Encoded(Add({2, 7}, {0.5f, -1.25f}));
  EXPECT_EQ(e, RawAdd(8, 2, {{2, 0.5f}, {7, -1.25f}}));
  EXPECT_EQ(e.size(), format::kLedgerAddHeaderSize + 2 * format::kLedgerAddPairSize);
  EXPECT_EQ(Encoded(Add({}, {})).size(), format::kLedgerAddHeaderSize);
}

TEST(StoreFormatTest, AnAddOfMoreThanHalfItsChunkIsDenseAndSumsTheSame) {
  const LedgerAdd add = Add({0, 2, 3, 5, 7}, {0.5f, -1.25f, 2.0f, 0.1f, 3e38f});
  const std::string e = Encoded(add);
  ASSERT_EQ(e.size(), format::kLedgerRowHeaderSize + 8 * sizeof(float));  // 37 bytes, sparse would be 49
  EXPECT_EQ(e[0], static_cast<char>(format::kLedgerDenseAddTag));
  EXPECT_EQ(e.substr(1, 4), Bytes<uint32_t>(8));
  Result<std::vector<double>> sums = Sum({e, e});
  ASSERT_TRUE(sums.ok()) << sums.status().ToString();
  EXPECT_THAT(*sums, ElementsAre(1.0, 0.0, -2.5, 4.0, 0.0, 2.0 * double{0.1f}, 0.0, 2.0 * double{3e38f}));
  std::string nan = e;
  const float bad = std::nanf("");
  std::memcpy(nan.data() + format::kLedgerRowHeaderSize + 4, &bad, sizeof(bad));
  EXPECT_THAT(Sum({nan}).status().message(), HasSubstr("dense ledger add has a value that is not finite at index 1"));
  EXPECT_THAT(Sum({e.substr(0, e.size() - 1)}).status().message(), HasSubstr("dense ledger add has 31 payload bytes"));
  std::vector<double> row;
  EXPECT_THAT(format::DecodeLedgerRow(e, &row).message(), HasSubstr("an add where a merged row belongs"));
}

TEST(StoreFormatTest, DenseRowRoundTripsBitForBit) {
  const std::vector<double> sums = {0.0, -0.0, 1e-300, 0.1, -123456.789, 3e38};
  const std::string row = format::EncodeLedgerRow(sums);
  EXPECT_EQ(row.size(), format::kLedgerRowHeaderSize + sums.size() * sizeof(double));
  EXPECT_EQ(row[0], static_cast<char>(format::kLedgerRowTag));
  EXPECT_EQ(row.substr(1, 4), Bytes<uint32_t>(6));
  std::vector<double> back;
  ASSERT_TRUE(format::DecodeLedgerRow(row, &back).ok());
  ASSERT_EQ(back.size(), sums.size());
  EXPECT_EQ(std::memcmp(back.data(), sums.data(), sums.size() * sizeof(double)), 0);
  ASSERT_TRUE(format::DecodeLedgerRow(format::EncodeLedgerRow({}), &back).ok());
  EXPECT_TRUE(back.empty());
}

TEST(StoreFormatTest, EntriesAddUpInDoublePrecision) {
  const float tenth = 0.1f;
  std::vector<std::string> entries = {format::EncodeLedgerRow(std::vector<double>(8, 1.0))};
  double want = 1.0;
  for (int i = 0; i < 1000; ++i) {
    entries.push_back(Encoded(Add({3}, {tenth})));
    want += static_cast<double>(tenth);
  }
  entries.push_back(Encoded(Add({0, 7}, {1e-8f, 2.0f})));
  Result<std::vector<double>> sums = Sum(entries);
  ASSERT_TRUE(sums.ok()) << sums.status().ToString();
  EXPECT_THAT(*sums, ElementsAre(1.0 + static_cast<double>(1e-8f), 1.0, 1.0, want, 1.0, 1.0, 1.0, 3.0));
  // A float sum would have drifted from the double sum long before.
  float f = 1.0f;
  for (int i = 0; i < 1000; ++i) f += tenth;
  EXPECT_NE(static_cast<double>(f), want);
}

TEST(StoreFormatTest, RefusesHostileEntriesNamingTheProblem) {
  const std::string good_row = format::EncodeLedgerRow(std::vector<double>(8, 0.0));
  std::string nan_row = good_row;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::memcpy(nan_row.data() + format::kLedgerRowHeaderSize + 8, &nan, sizeof(nan));
  struct Case {
    std::string name;
    std::vector<std::string> entries;
    std::string needle;
  };
  const std::vector<Case> cases = {
      {"empty", {""}, "has 0 bytes, shorter than its header"},
      {"tag only", {"\x01\x08"}, "has 2 bytes, shorter than its header"},
      {"unknown tag", {std::string("\x07\x08\0\0\0", 5)}, "unknown tag 7"},
      {"sparse without count", {RawAdd(8, 0, {}).substr(0, 7)}, "shorter than its 9-byte header"},
      {"count beyond the bytes", {RawAdd(8, 3, {{1, 1.0f}})}, "8 payload bytes for 3 (index, value) pairs"},
      {"huge count", {RawAdd(8, 0xffffffffu, {})}, "0 payload bytes for 4294967295"},
      {"trailing byte", {RawAdd(8, 1, {{1, 1.0f}}) + "x"}, "9 payload bytes for 1"},
      {"index repeated", {RawAdd(8, 2, {{4, 1.0f}, {4, 1.0f}})}, "index 4 at pair 1, not above the index before it"},
      {"index going back", {RawAdd(8, 2, {{5, 1.0f}, {2, 1.0f}})}, "index 2 at pair 1, not above"},
      {"index out of range", {RawAdd(8, 1, {{8, 1.0f}})}, "index 8 at pair 0, beyond the 8 elements"},
      {"nan value", {RawAdd(8, 1, {{1, std::nanf("")}})}, "with a value that is not finite"},
      {"infinite value", {RawAdd(8, 1, {{1, std::numeric_limits<float>::infinity()}})}, "not finite"},
      {"row too short", {good_row.substr(0, good_row.size() - 1)}, "63 payload bytes for 8 sums"},
      {"row nan", {nan_row}, "a sum that is not finite at index 1"},
      {"too many elements", {RawAdd(format::kMaxLedgerElements + 1, 0, {})}, "more than a ledger row holds"},
      {"sizes disagree", {good_row, RawAdd(9, 0, {})}, "is for 9 elements, the entries before it for 8"},
      {"row after add of other size", {RawAdd(4, 0, {}), good_row}, "is for 8 elements, the entries before it for 4"},
  };
  for (const Case& c : cases) {
    Result<std::vector<double>> sums = Sum(c.entries);
    ASSERT_FALSE(sums.ok()) << c.name;
    EXPECT_EQ(sums.status().code(), StatusCode::kDataLoss) << c.name;
    EXPECT_THAT(sums.status().message(), HasSubstr(c.needle)) << c.name << ": " << sums.status().ToString();
  }
  std::vector<double> row;
  const Status sparse = format::DecodeLedgerRow(RawAdd(8, 0, {}), &row);
  EXPECT_EQ(sparse.code(), StatusCode::kDataLoss);
  EXPECT_THAT(sparse.message(), HasSubstr("an add where a merged row belongs"));
  EXPECT_EQ(format::DecodeLedgerRow("\x02", &row).code(), StatusCode::kDataLoss);
}

TEST(StoreFormatTest, CheckLedgerAddNamesWhatBreaksTheContract) {
  EXPECT_TRUE(format::CheckLedgerAdd(Add({0, 3, 7}, {1, 2, 3})).ok());
  EXPECT_TRUE(format::CheckLedgerAdd(Add({}, {})).ok());
  struct Case {
    LedgerAdd add;
    std::string needle;
  };
  const std::vector<Case> cases = {
      {Add({1}, {1}, 8, -1), "origin -1, chunk (table 1, chunk 2): the origin is negative"},
      {Add({1, 2}, {1}), "has 2 indices but 1 values"},
      {Add({3, 3}, {1, 1}), "index 3 at position 1 is not above the one before it (3)"},
      {Add({3, 1}, {1, 1}), "index 1 at position 1 is not above"},
      {Add({8}, {1}), "index 8 at position 0 is beyond num_elements 8"},
      {Add({1}, {std::numeric_limits<float>::quiet_NaN()}), "has a value that is not finite"},
      {Add({1}, {-std::numeric_limits<float>::infinity()}), "has a value that is not finite"},
      {Add({}, {}, format::kMaxLedgerElements + 1), "is more than a ledger row holds"},
  };
  for (const Case& c : cases) {
    const Status s = format::CheckLedgerAdd(c.add);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.needle;
    EXPECT_THAT(s.message(), HasSubstr(c.needle));
  }
}

TEST(StoreFormatTest, WorkerRecordsKeepTheUpdatePart) {
  const std::string key = std::string("\0\0\0\x05", 4);
  WorkerRecord in{5, 7, 6, false, 3};
  WorkerRecord out;
  ASSERT_TRUE(format::DecodeWorker(key, format::EncodeWorker(in), &out).ok());
  EXPECT_EQ(out.worker, 5);
  EXPECT_EQ(out.clock, 7);
  EXPECT_EQ(out.last_update_clock, 6);
  EXPECT_EQ(out.last_update_part, 3);
  // A record written before parts existed: its last update was a whole clock.
  ASSERT_TRUE(format::DecodeWorker(key, format::EncodeWorker(in).substr(0, format::kWorkerValueSizeWhole), &out).ok());
  EXPECT_EQ(out.last_update_part, WorkerRecord::kWholeClock);
  std::string bad = format::EncodeWorker(WorkerRecord{5, 7, 6, false, -7});
  EXPECT_THAT(format::DecodeWorker(key, bad, &out).message(), HasSubstr("update part -7"));
  EXPECT_THAT(format::DecodeWorker(key, bad.substr(0, 19), &out).message(), HasSubstr("has 19 bytes"));
}

TEST(StoreFormatTest, TheCurrentFormatAndTheOneBeforeItAreRead) {
  EXPECT_TRUE(format::CheckFormatVersion(format::kFormatVersion, "store s").ok());
  EXPECT_TRUE(format::CheckFormatVersion(format::kOldestReadableFormat, "store s").ok());
  const Status older = format::CheckFormatVersion(format::kOldestReadableFormat - 1, "store s");
  EXPECT_EQ(older.code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(older.message(), HasSubstr("store s has format version 1, older than this build reads (2 to 3)"));
  const Status newer = format::CheckFormatVersion(format::kFormatVersion + 1, "store s");
  EXPECT_EQ(newer.code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(newer.message(), HasSubstr("newer than this build reads"));
  EXPECT_EQ(format::CheckFormatVersion(0, "store s").code(), StatusCode::kDataLoss);
}

// The operator as RocksDB calls it.
class LedgerMergeOperatorTest : public ::testing::Test {
 protected:
  // FullMergeV2 over `existing` (none when null) and `operands`.
  bool FullMerge(const std::string* existing, const std::vector<std::string>& operands, std::string* out) {
    const std::vector<rocksdb::Slice> slices(operands.begin(), operands.end());
    const rocksdb::Slice existing_slice = existing != nullptr ? rocksdb::Slice(*existing) : rocksdb::Slice();
    const rocksdb::Slice key(key_);
    rocksdb::MergeOperator::MergeOperationInput in(key, existing != nullptr ? &existing_slice : nullptr, slices,
                                                   nullptr);
    rocksdb::Slice existing_operand;
    rocksdb::MergeOperator::MergeOperationOutput merge_out(*out, existing_operand);
    return op_->FullMergeV2(in, &merge_out);
  }
  bool PartialMerge(const std::vector<std::string>& operands, std::string* out) {
    const std::deque<rocksdb::Slice> slices(operands.begin(), operands.end());
    return op_->PartialMergeMulti(rocksdb::Slice(key_), slices, out, nullptr);
  }
  static std::vector<double> Row(const std::string& value) {
    std::vector<double> sums;
    EXPECT_TRUE(format::DecodeLedgerRow(value, &sums).ok());
    return sums;
  }

  std::shared_ptr<rocksdb::MergeOperator> op_ = NewLedgerMergeOperator();
  std::string key_ = format::LedgerKey(3, {1, 2});
};

TEST_F(LedgerMergeOperatorTest, FullMergeAddsOperandsOntoTheRow) {
  EXPECT_STREQ(op_->Name(), "geops.LedgerSum");
  std::string out;
  ASSERT_TRUE(FullMerge(nullptr, {Encoded(Add({1}, {0.5f}, 4)), Encoded(Add({1, 3}, {0.25f, 2.0f}, 4))}, &out));
  EXPECT_THAT(Row(out), ElementsAre(0.0, 0.75, 0.0, 2.0));
  const std::string row = out;
  ASSERT_TRUE(FullMerge(&row, {Encoded(Add({0}, {-1.0f}, 4))}, &out));
  EXPECT_THAT(Row(out), ElementsAre(-1.0, 0.75, 0.0, 2.0));
}

TEST_F(LedgerMergeOperatorTest, PartialMergeCombinesOnlyWhenTheRowIsNoBigger) {
  // A 64-element row takes 5 + 512 bytes; two small adds take 2 x 17.
  std::string out;
  EXPECT_FALSE(PartialMerge({Encoded(Add({1}, {1.0f}, 64)), Encoded(Add({2}, {1.0f}, 64))}, &out));
  std::vector<uint32_t> many(64);
  for (uint32_t i = 0; i < 64; ++i) many[i] = i;
  // A whole-chunk add is dense (5 + 256 bytes): with a small add it is
  // still smaller than the row, two of them are not.
  const std::string big = Encoded(Add(many, std::vector<float>(64, 0.5f), 64));
  EXPECT_FALSE(PartialMerge({big, Encoded(Add({2}, {1.0f}, 64))}, &out));
  ASSERT_TRUE(PartialMerge({big, big, Encoded(Add({2}, {0.5f}, 64))}, &out));
  std::vector<double> want(64, 1.0);
  want[2] = 1.5;
  EXPECT_EQ(Row(out), want);
  // An operand that is already a row (an earlier partial merge) is always folded in.
  const std::string row = out;
  ASSERT_TRUE(PartialMerge({row, Encoded(Add({0}, {1.0f}, 64))}, &out));
  want[0] = 2.0;
  EXPECT_EQ(Row(out), want);
  // A malformed operand is left for the full merge to report.
  EXPECT_FALSE(PartialMerge({row, "junk"}, &out));
}

TEST_F(LedgerMergeOperatorTest, AFailedMergeSaysWhichRowAndWhy) {
  TakeLedgerMergeError();
  std::string out;
  ASSERT_FALSE(FullMerge(nullptr, {Encoded(Add({1}, {1.0f}, 4)), RawAdd(4, 1, {{9, 1.0f}})}, &out));
  EXPECT_EQ(TakeLedgerMergeError(),
            "ledger of origin 3, chunk (table 1, chunk 2): a sparse ledger add has index 9 at pair 0, beyond the 4 "
            "elements of its chunk");
  EXPECT_EQ(TakeLedgerMergeError(), "");  // taken
  const std::string bad_row = "\x02";
  ASSERT_FALSE(FullMerge(&bad_row, {Encoded(Add({1}, {1.0f}, 4))}, &out));
  EXPECT_THAT(TakeLedgerMergeError(), HasSubstr("shorter than its header"));
}

}  // namespace
}  // namespace geops::storage
