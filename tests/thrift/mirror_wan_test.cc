// Three sites in one process, each shard with its whole WAN side
// (WanEndpoint: shaped links, real Thrift mirror connections on loopback,
// replicator): the counter workload ends exact at every site, and bytes are
// counted on every link.
#include <gtest/gtest.h>

#include <future>
#include <memory>
#include <vector>

#include "datacenter/shard.h"
#include "site/wan_endpoint.h"
#include "tests/worker/local_connection.h"
#include "worker/mlp_model.h"
#include "worker/ps_client.h"
#include "worker/trainer.h"

namespace geops::rpc {
namespace {

worker::MlpShape Shape() {
  worker::MlpShape s;
  s.sizes = {32, 16, 4};
  return s;
}

ModelSpec CounterModel() {
  std::vector<TableSpec> tables = worker::MlpTables(Shape());
  for (TableSpec& t : tables) t.init = InitKind::kZeros;
  Result<ModelSpec> spec = ModelSpec::Create(std::move(tables), 256, 1);
  EXPECT_TRUE(spec.ok());
  return std::move(spec).value();
}

class ThreeSites {
 public:
  ThreeSites(wan::WanMode mode, int shards) : spec_(CounterModel()), shards_(shards) {
    for (SiteId s = 0; s < 3; ++s) {
      for (int i = 0; i < shards; ++i) {
        ShardOptions so;
        so.shard_id = i;
        so.num_shards = shards;
        so.num_workers = 2;
        so.max_read_wait_ms = 60000;
        auto shard = datacenter::Shard::Create(spec_, so);
        EXPECT_TRUE(shard.ok());
        shard_[s].push_back(std::move(shard).value());
        site::WanEndpointOptions o;
        o.self = MirrorIdentity{s, i, spec_.Fingerprint()};
        for (SiteId p = 0; p < 3; ++p) {
          if (p == s) continue;
          // 100 Mbit/s, 40 ms one-way, replayed 20x faster.
          o.links.push_back(wan::PeerLink{p, std::to_string(s) + "->" + std::to_string(p),
                                          wan::LinkSchedule::Constant(100e6, 0.04)});
        }
        o.wan.mode = mode;
        o.wan.staleness_ds = 2;
        o.shaping.time_scale = 20;
        o.shaping.heartbeat_ms = 100;
        auto e = site::WanEndpoint::Start(&spec_, shard_[s].back().get(), o);
        EXPECT_TRUE(e.ok()) << e.status().ToString();
        endpoint_[s].push_back(std::move(e).value());
      }
    }
    for (SiteId s = 0; s < 3; ++s)
      for (int i = 0; i < shards; ++i)
        for (SiteId p = 0; p < 3; ++p)
          if (p != s) endpoint_[s][i]->peers()->Set(p, endpoint_[p][i]->mirror_address());
  }

  std::vector<double> RunCounter(int64_t clocks) {
    std::vector<std::unique_ptr<worker::LocalConnectionFactory>> factories;
    std::vector<std::future<Result<worker::TrainerReport>>> runs;
    for (SiteId s = 0; s < 3; ++s) {
      std::vector<datacenter::Shard*> ptrs;
      for (auto& sh : shard_[s]) ptrs.push_back(sh.get());
      factories.push_back(std::make_unique<worker::LocalConnectionFactory>(ptrs));
      for (int w = 0; w < 2; ++w) {
        auto* f = factories.back().get();
        runs.push_back(std::async(std::launch::async, [this, f, w, clocks]() -> Result<worker::TrainerReport> {
          WorkerClientOptions co;
          co.worker_id = w;
          co.staleness = 1;
          co.rpc_timeout_ms = 60000;
          GEOPS_ASSIGN_OR_RETURN(auto client, worker::PsClient::Create(spec_, shards_, co, f));
          GEOPS_RETURN_IF_ERROR(client->Start());
          worker::TrainerOptions to;
          to.workload = "counter";
          to.shape = Shape();
          to.clocks = clocks;
          to.evaluator = w == 0;
          to.counter_workers = 6;
          to.progress_every_seconds = 3600;
          return worker::RunTrainer(to, client.get(), nullptr);
        }));
      }
    }
    std::vector<double> errors;
    for (auto& r : runs) {
      auto rep = r.get();
      EXPECT_TRUE(rep.ok()) << rep.status().ToString();
      if (rep.ok() && rep->counter_max_abs_error) errors.push_back(*rep->counter_max_abs_error);
    }
    return errors;
  }

  site::WanEndpoint* endpoint(SiteId s, int i) { return endpoint_[s][i].get(); }

 private:
  ModelSpec spec_;
  int shards_;
  std::vector<std::unique_ptr<datacenter::Shard>> shard_[3];
  std::vector<std::unique_ptr<site::WanEndpoint>> endpoint_[3];
};

class MirrorWanTest : public ::testing::TestWithParam<wan::WanMode> {};

TEST_P(MirrorWanTest, CounterEndsExactAtEverySiteOverShapedThriftLinks) {
  ThreeSites sites(GetParam(), 2);
  std::vector<double> errors = sites.RunCounter(30);
  ASSERT_EQ(errors.size(), 3u);
  for (double e : errors) EXPECT_EQ(e, 0.0);
  for (SiteId s = 0; s < 3; ++s) {
    for (int i = 0; i < 2; ++i) {
      EXPECT_TRUE(sites.endpoint(s, i)->WaitSettled(Deadline::InMs(20000)).ok());
      std::vector<wan::LinkStats> links = sites.endpoint(s, i)->transport()->stats();
      ASSERT_EQ(links.size(), 2u);
      for (const wan::LinkStats& l : links) {
        EXPECT_GT(l.batches, 0) << l.name;
        EXPECT_GT(l.wire_bytes, l.bytes_delivered) << l.name;  // framing on top of the batches
        EXPECT_EQ(l.refused, 0) << l.name;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, MirrorWanTest, ::testing::Values(wan::WanMode::kAsp, wan::WanMode::kBsp),
                         [](const auto& info) { return std::string(wan::WanModeName(info.param)); });

}  // namespace
}  // namespace geops::rpc
