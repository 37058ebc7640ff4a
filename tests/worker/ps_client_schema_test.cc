// PsClient with a client-defined model: the worker brings the tables and
// their initial values; the shards take them from the first worker.
#include <gtest/gtest.h>

#include <cmath>
#include <thread>

#include "tests/worker/local_connection.h"
#include "worker/ps_client.h"

namespace geops::worker {
namespace {

// Tables "a" 40x16 and "b" 1x7 (chunks of 64 floats), values start + i * step.
struct UserModel {
  UserModel(float start, float step, int64_t a_rows = 40) {
    a.resize(static_cast<size_t>(a_rows * 16));
    b.resize(7);
    for (size_t i = 0; i < a.size(); ++i) a[i] = start + step * static_cast<float>(i);
    for (size_t i = 0; i < b.size(); ++i) b[i] = -start - step * static_cast<float>(i);
    spec = *ModelSpec::Create({{"a", a_rows, 16, InitKind::kProvided, 0.0f, ValuesChecksum(a)},
                               {"b", 1, 7, InitKind::kProvided, 0.0f, ValuesChecksum(b)}},
                              256, 0);
    ptrs = {a.data(), b.data()};
  }
  std::vector<float> a, b;
  ModelSpec spec;
  std::vector<const float*> ptrs;
};

// A site of `shards` shard hosts awaiting a model, `workers` workers each.
class ClientSite {
 public:
  ClientSite(int shards, int workers) {
    built_.resize(shards);
    for (int s = 0; s < shards; ++s) {
      ShardOptions o;
      o.shard_id = s;
      o.num_shards = shards;
      o.num_workers = workers;
      o.worker_lease_ms = 10000;
      auto host = datacenter::ShardHost::AwaitingModel(o, [this, o, s](const ModelSpec& spec) -> Result<datacenter::Shard*> {
        GEOPS_ASSIGN_OR_RETURN(built_[s], datacenter::Shard::Create(spec, o));
        return built_[s].get();
      });
      EXPECT_TRUE(host.ok());
      hosts_.push_back(std::move(host).value());
      raw_.push_back(hosts_.back().get());
    }
    factory_ = std::make_unique<HostConnectionFactory>(raw_);
  }

  Result<std::unique_ptr<PsClient>> Client(WorkerId w, const UserModel& m) {
    WorkerClientOptions o;
    o.worker_id = w;
    o.staleness = 0;
    o.rpc_timeout_ms = 5000;
    o.retry_backoff_ms = 1;
    o.heartbeat_ms = 50;
    GEOPS_ASSIGN_OR_RETURN(auto c, PsClient::Create(m.spec, static_cast<int>(raw_.size()), o, factory_.get()));
    GEOPS_RETURN_IF_ERROR(c->Start(m.ptrs));
    return c;
  }

 private:
  std::vector<std::unique_ptr<datacenter::Shard>> built_;  // outlive the hosts
  std::vector<std::unique_ptr<datacenter::ShardHost>> hosts_;
  std::vector<datacenter::ShardHost*> raw_;
  std::unique_ptr<HostConnectionFactory> factory_;
};

TEST(PsClientSchemaTest, TheFirstWorkersValuesAreEveryWorkersStartAndUpdatesStayExact) {
  ClientSite site(3, 2);
  UserModel model(0.25f, 0.5f);
  auto c0 = site.Client(0, model);
  ASSERT_TRUE(c0.ok()) << c0.status().ToString();
  auto c1 = site.Client(1, model);
  ASSERT_TRUE(c1.ok()) << c1.status().ToString();
  constexpr int kClocks = 4;
  auto run = [&](PsClient* c) {
    for (int k = 0; k < kClocks; ++k) {
      ASSERT_TRUE(c->Refresh().ok());
      for (TableId t = 0; t < 2; ++t) {
        const TableSpec& ts = c->spec().table(t);
        std::fill(c->delta(t), c->delta(t) + ts.rows * ts.cols, 1.0f);
      }
      c->MarkAllDirty();
      ASSERT_TRUE(c->Clock(k + 1 == kClocks).ok());
    }
  };
  std::thread t1([&] { run(c1->get()); });
  run(c0->get());
  t1.join();
  ASSERT_TRUE((*c0)->ReadAt(kClocks, 0).ok());
  // Every value is its initial value plus exactly 2 workers x 4 clocks.
  for (size_t i = 0; i < model.a.size(); ++i) ASSERT_EQ((*c0)->table(0)[i], model.a[i] + 8.0f) << i;
  for (size_t i = 0; i < model.b.size(); ++i) ASSERT_EQ((*c0)->table(1)[i], model.b[i] + 8.0f) << i;
}

TEST(PsClientSchemaTest, AWorkerWithOtherInitialValuesIsToldWhichTable) {
  ClientSite site(2, 2);
  UserModel model(0.0f, 1.0f);
  ASSERT_TRUE(site.Client(0, model).ok());
  UserModel other(0.0f, 2.0f);  // another seed, same shapes
  Status s = site.Client(1, other).status();
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("table 'a' has other initial values"), std::string::npos) << s.message();
  Status shape = site.Client(1, UserModel(0.0f, 1.0f, 41)).status();
  EXPECT_NE(shape.message().find("table 'a' has shape 40x16 there, 41x16 here"), std::string::npos)
      << shape.message();
}

TEST(PsClientSchemaTest, StartRefusesValuesThatAreNotTheSchemas) {
  ClientSite site(1, 1);
  UserModel model(0.0f, 1.0f);
  WorkerClientOptions o;
  HostConnectionFactory unused({});
  auto c = PsClient::Create(model.spec, 1, o, &unused);
  ASSERT_TRUE(c.ok());
  std::vector<float> changed = model.a;
  changed[5] += 1.0f;
  std::vector<const float*> ptrs = {changed.data(), model.b.data()};
  Status s = (*c)->Start(ptrs);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("table 'a'"), std::string::npos);
  EXPECT_EQ((*c)->Start({}).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace geops::worker
