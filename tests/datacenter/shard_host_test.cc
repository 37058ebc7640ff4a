// ShardHost: a shard process whose model the first worker brings.
#include "datacenter/shard_host.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numeric>

#include "tests/datacenter/shard_test_util.h"

namespace geops::datacenter {
namespace {

using testing::TestOptions;

// A client-defined model: "w" 10x16 and "b" 1x5, chunks of 64 floats; with
// `offset` its initial values are i + offset for element i of each table.
struct ClientModel {
  explicit ClientModel(float offset = 0.0f, int64_t w_rows = 10) {
    w.resize(static_cast<size_t>(w_rows * 16));
    b.resize(5);
    std::iota(w.begin(), w.end(), offset);
    std::iota(b.begin(), b.end(), offset + 1000.0f);
    std::vector<TableSpec> tables = {{"w", w_rows, 16, InitKind::kProvided, 0.0f, ValuesChecksum(w)},
                                     {"b", 1, 5, InitKind::kProvided, 0.0f, ValuesChecksum(b)}};
    spec = *ModelSpec::Create(std::move(tables), 256, 0);
  }
  const float* table(TableId t) const { return t == 0 ? w.data() : b.data(); }
  // The chunks `keys` back to back.
  std::vector<float> Values(const std::vector<ChunkKey>& keys) const {
    std::vector<float> out;
    for (ChunkKey k : keys) {
      const float* src = table(k.table) + spec.ChunkOffset(k);
      out.insert(out.end(), src, src + spec.ChunkElements(k));
    }
    return out;
  }
  std::vector<float> w, b;
  ModelSpec spec;
};

// A host for shard `shard` of 2 whose builder makes a real shard.
struct HostRig {
  explicit HostRig(ShardId shard = 0, Status fail = Status::Ok()) : options(TestOptions(2, 2, shard)) {
    auto made = ShardHost::AwaitingModel(options, [this, fail](const ModelSpec& spec) -> Result<Shard*> {
      ++builds;
      if (!fail.ok()) return fail;
      GEOPS_ASSIGN_OR_RETURN(built, Shard::Create(spec, options));
      return built.get();
    });
    EXPECT_TRUE(made.ok()) << made.status().ToString();
    host = std::move(made).value();
  }
  ShardOptions options;
  std::unique_ptr<Shard> built;
  std::unique_ptr<ShardHost> host;
  int builds = 0;
};

TEST(ShardHostTest, FirstSchemaFixesTheModelAndItsValuesBuildTheShard) {
  HostRig rig;
  ClientModel model(0.5f);
  EXPECT_EQ(rig.host->shard(), nullptr);
  EXPECT_EQ(rig.host->NotReady().code(), StatusCode::kUnavailable);
  EXPECT_NE(rig.host->NotReady().message().find("no worker has registered"), std::string::npos);

  auto reply = rig.host->RegisterSchema(1, model.spec, "");
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(reply->model_fingerprint, model.spec.Fingerprint());
  EXPECT_EQ(reply->missing, model.spec.ChunksOfShard(0, 2));
  ASSERT_EQ(reply->missing.size(), 2u);  // w/0 and w/2 (b/0 is the 4th chunk: shard 1)

  std::vector<ChunkKey> first = {reply->missing[0]};
  auto left = rig.host->InitValues(1, reply->model_fingerprint, first, model.Values(first), "");
  ASSERT_TRUE(left.ok()) << left.status().ToString();
  EXPECT_EQ(*left, 1);
  EXPECT_EQ(rig.host->shard(), nullptr);
  EXPECT_NE(rig.host->NotReady().message().find("1 of its 2 chunks"), std::string::npos);

  // Another worker with the same model sends everything: what is there stays.
  auto all = rig.host->InitValues(0, reply->model_fingerprint, reply->missing, model.Values(reply->missing), "");
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  EXPECT_EQ(*all, 0);
  ASSERT_NE(rig.host->shard(), nullptr);
  EXPECT_EQ(rig.builds, 1);

  // The shard starts from exactly the worker's values.
  testing::ShardSnapshot snap = testing::SnapshotOf(*rig.host->shard());
  ASSERT_EQ(snap.size(), 2u);
  for (const auto& [key, values] : snap) EXPECT_EQ(values, model.Values(std::vector<ChunkKey>{key}));

  // Later schemas are compared with the shard's model.
  EXPECT_TRUE(rig.host->RegisterSchema(0, model.spec, "").ok());
  EXPECT_TRUE(rig.host->RegisterSchema(0, model.spec, "")->missing.empty());
}

TEST(ShardHostTest, ALaterSchemaMustMatchAndTheErrorNamesTheTable) {
  HostRig rig;
  ClientModel model;
  ASSERT_TRUE(rig.host->RegisterSchema(0, model.spec, "").ok());

  Status shape = rig.host->RegisterSchema(1, ClientModel(0.0f, 12).spec, "").status();
  EXPECT_EQ(shape.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(shape.message().find("table 'w' has shape 10x16 there, 12x16 here"), std::string::npos)
      << shape.message();

  Status values = rig.host->RegisterSchema(1, ClientModel(1.0f).spec, "").status();
  EXPECT_EQ(values.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(values.message().find("table 'w' has other initial values"), std::string::npos) << values.message();

  std::vector<TableSpec> fewer = {model.spec.table(0)};
  Status tables = rig.host->RegisterSchema(1, *ModelSpec::Create(fewer, 256, 0), "").status();
  EXPECT_NE(tables.message().find("table 'b' is only there"), std::string::npos) << tables.message();

  // Still the first model after the refusals.
  EXPECT_TRUE(rig.host->RegisterSchema(1, model.spec, "").ok());
}

TEST(ShardHostTest, APeerCheckRefusalKeepsTheModelUnfixedAndIsAskedOnlyBeforeFixing) {
  ShardOptions options = TestOptions(2, 2, 0);
  std::unique_ptr<Shard> built;
  int asked = 0;
  bool fixed_while_asking = false;
  ShardHost* self = nullptr;
  Status peer_says = FailedPreconditionError("the model differs from the one site east trains: table 'w' ...");
  auto made = ShardHost::AwaitingModel(
      options,
      [&](const ModelSpec& spec) -> Result<Shard*> {
        GEOPS_ASSIGN_OR_RETURN(built, Shard::Create(spec, options));
        return built.get();
      },
      [&](const ModelSpec&) {
        ++asked;
        // Fixed before the peers are asked: a peer asking now sees it.
        fixed_while_asking = self->FixedModel().has_value();
        return peer_says;
      });
  ASSERT_TRUE(made.ok());
  std::unique_ptr<ShardHost> host = std::move(made).value();
  self = host.get();
  ClientModel model;
  Status refused = host->RegisterSchema(0, model.spec, "").status();
  EXPECT_EQ(refused.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.message().find("site east"), std::string::npos) << refused.message();
  EXPECT_TRUE(fixed_while_asking);
  EXPECT_FALSE(host->FixedModel().has_value());
  EXPECT_EQ(host->shard(), nullptr);

  peer_says = Status::Ok();
  auto reply = host->RegisterSchema(0, model.spec, "");
  ASSERT_TRUE(reply.ok());
  ASSERT_TRUE(host->FixedModel().has_value());
  EXPECT_EQ(host->FixedModel()->Fingerprint(), model.spec.Fingerprint());
  EXPECT_EQ(asked, 2);
  ASSERT_TRUE(host->InitValues(0, model.spec.Fingerprint(), reply->missing, model.Values(reply->missing), "").ok());
  EXPECT_NE(host->shard(), nullptr);
  // Fixed: later workers are compared with it here, the peers not asked again.
  ASSERT_TRUE(host->RegisterSchema(1, model.spec, "").ok());
  EXPECT_EQ(asked, 2);
}

TEST(ShardHostTest, AFailedHostRefusesEveryCallWithItsReason) {
  HostRig rig(0);
  ClientModel model;
  auto reply = rig.host->RegisterSchema(0, model.spec, "");
  ASSERT_TRUE(reply.ok());
  ASSERT_TRUE(rig.host->InitValues(0, model.spec.Fingerprint(), reply->missing, model.Values(reply->missing), "").ok());
  ASSERT_NE(rig.host->shard(), nullptr);

  rig.host->Fail(FailedPreconditionError("site west trains another model: table 'w' has shape 12x16"));
  EXPECT_EQ(rig.host->shard(), nullptr);
  EXPECT_EQ(rig.host->NotReady().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(rig.host->NotReady().message().find("site west"), std::string::npos);
  Status again = rig.host->RegisterSchema(1, model.spec, "").status();
  EXPECT_NE(again.message().find("site west"), std::string::npos) << again.message();
  EXPECT_NE(rig.host->InitValues(1, model.spec.Fingerprint(), {}, {}, "").status().message().find("site west"),
            std::string::npos);
}

TEST(ShardHostTest, RefusesInitialValuesThatDoNotFitWithoutKeepingAny) {
  HostRig rig;
  ClientModel model;
  auto reply = rig.host->RegisterSchema(0, model.spec, "");
  ASSERT_TRUE(reply.ok());
  const uint64_t fp = reply->model_fingerprint;
  const std::vector<ChunkKey> own = reply->missing;

  std::vector<ChunkKey> foreign = {ChunkKey{0, 1}};  // shard 1's
  EXPECT_EQ(rig.host->InitValues(0, fp, foreign, model.Values(foreign), "").status().code(),
            StatusCode::kInvalidArgument);
  std::vector<float> nan = model.Values(own);
  nan[3] = std::numeric_limits<float>::quiet_NaN();
  Status bad = rig.host->InitValues(0, fp, own, nan, "").status();
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("initial values: value is NaN in table 'w'"), std::string::npos) << bad.message();
  std::vector<float> shortened = model.Values(own);
  shortened.pop_back();
  EXPECT_EQ(rig.host->InitValues(0, fp, own, shortened, "").status().code(), StatusCode::kInvalidArgument);
  std::vector<ChunkKey> twice = {own[0], own[0]};
  EXPECT_EQ(rig.host->InitValues(0, fp, twice, model.Values(twice), "").status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(rig.host->InitValues(0, fp + 1, own, model.Values(own), "").status().code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(rig.host->InitValues(2, fp, own, model.Values(own), "").status().code(),
            StatusCode::kInvalidArgument);  // no worker 2 in a site of 2

  // Nothing of the refused batches was kept: both chunks are still missing.
  EXPECT_EQ(rig.host->RegisterSchema(0, model.spec, "")->missing.size(), 2u);
  EXPECT_EQ(rig.builds, 0);
}

TEST(ShardHostTest, ValuesBeforeASchemaAndAWrongTokenAreRefused) {
  ShardOptions options = TestOptions(2, 1);
  options.auth_token = "secret";
  auto host = ShardHost::AwaitingModel(options, [](const ModelSpec&) -> Result<Shard*> {
    return InternalError("not reached");
  });
  ASSERT_TRUE(host.ok());
  ClientModel model;
  std::vector<ChunkKey> keys = {ChunkKey{1, 0}};
  EXPECT_EQ((*host)->InitValues(0, model.spec.Fingerprint(), keys, model.Values(keys), "secret").status().code(),
            StatusCode::kFailedPrecondition);
  Status token = (*host)->RegisterSchema(0, model.spec, "guess").status();
  EXPECT_EQ(token.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(token.message().find("secret"), std::string::npos);
}

TEST(ShardHostTest, AFailedBuildUnfixesTheModelSoAnotherCanTakeItsPlace) {
  HostRig rig(0, UnavailableError("disk full"));
  ClientModel model;
  auto reply = rig.host->RegisterSchema(0, model.spec, "");
  ASSERT_TRUE(reply.ok());
  Status built = rig.host->InitValues(0, reply->model_fingerprint, reply->missing,
                                      model.Values(reply->missing), "").status();
  EXPECT_EQ(built.code(), StatusCode::kUnavailable);
  EXPECT_EQ(rig.host->shard(), nullptr);
  // Unfixed: a different model is now accepted.
  EXPECT_TRUE(rig.host->RegisterSchema(0, ClientModel(0.0f, 12).spec, "").ok());
}

TEST(ShardHostTest, AShardWithoutChunksIsBuiltAtTheSchema) {
  ShardOptions options = TestOptions(1, 8, 7);  // 8 shards, the model has 3 chunks
  std::unique_ptr<Shard> built;
  auto host = ShardHost::AwaitingModel(options, [&](const ModelSpec& spec) -> Result<Shard*> {
    GEOPS_ASSIGN_OR_RETURN(built, Shard::Create(spec, options));
    return built.get();
  });
  ASSERT_TRUE(host.ok());
  auto reply = (*host)->RegisterSchema(0, ClientModel().spec, "");
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_TRUE(reply->missing.empty());
  EXPECT_NE((*host)->shard(), nullptr);
}

TEST(ShardHostTest, AShardOfTheBuiltInModelRefusesAClientSchema) {
  ModelSpec spec = testing::TestModel();
  std::unique_ptr<Shard> shard = testing::MakeShard(spec, TestOptions(1));
  std::unique_ptr<ShardHost> host = ShardHost::Serving(shard.get());
  Status s = host->RegisterSchema(0, ClientModel().spec, "").status();
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("workload = \"client\""), std::string::npos) << s.message();
}

}  // namespace
}  // namespace geops::datacenter
