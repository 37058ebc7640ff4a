// WanSites: several in-process "sites", each with real datacenter::Shards,
// one Replicator per shard, and shard i of every site connected through its
// own FakeWanNetwork. Workers run the real client and trainer (PsClient +
// RunTrainer) over in-process connections. Test-only.
#ifndef GEOPS_TESTS_WAN_WAN_SITES_H_
#define GEOPS_TESTS_WAN_WAN_SITES_H_

#include <gtest/gtest.h>

#include <future>
#include <memory>
#include <optional>
#include <vector>

#include "common/model_spec.h"
#include "datacenter/shard.h"
#include "tests/wan/fake_wan_network.h"
#include "tests/worker/local_connection.h"
#include "wan/replication/replicator.h"
#include "worker/mlp_model.h"
#include "worker/ps_client.h"
#include "worker/trainer.h"

namespace geops::wan::testing {

// A small all-zero model with several chunks per table (the counter model).
inline worker::MlpShape SmallShape() {
  worker::MlpShape s;
  s.sizes = {24, 12, 4};
  return s;
}
inline ModelSpec CounterModel() {
  std::vector<TableSpec> tables = worker::MlpTables(SmallShape());
  for (TableSpec& t : tables) {
    t.init = InitKind::kZeros;
    t.init_scale = 0;
  }
  Result<ModelSpec> spec = ModelSpec::Create(std::move(tables), 128, 3);
  EXPECT_TRUE(spec.ok()) << spec.status().ToString();
  return std::move(spec).value();
}

class WanSites {
 public:
  // `time`: the replicators' clock (null: the steady clock).
  WanSites(ModelSpec spec, std::vector<int> workers_per_site, int shards, WanOptions options,
           LinkFaults faults, uint64_t seed = 1, const TimeSource* time = nullptr)
      : spec_(std::move(spec)), workers_(std::move(workers_per_site)), shards_(shards) {
    const int n = static_cast<int>(workers_.size());
    std::vector<SiteId> all;
    for (SiteId s = 0; s < n; ++s) all.push_back(s);
    for (int i = 0; i < shards; ++i) {
      nets_.push_back(std::make_unique<FakeWanNetwork>(seed * 101 + i));
      nets_.back()->SetAllFaults(all, faults);
    }
    shard_.resize(n);
    repl_.resize(n);
    for (SiteId s = 0; s < n; ++s) {
      for (int i = 0; i < shards; ++i) {
        ShardOptions so;
        so.shard_id = i;
        so.num_shards = shards;
        so.num_workers = workers_[s];
        so.max_read_wait_ms = 60000;
        auto shard = datacenter::Shard::Create(spec_, so);
        EXPECT_TRUE(shard.ok()) << shard.status().ToString();
        shard_[s].push_back(std::move(shard).value());
        ReplicatorConfig rc;
        rc.site = s;
        rc.shard = i;
        for (SiteId p : all)
          if (p != s) rc.peers.push_back(p);
        rc.options = options;
        rc.time = time;
        auto r = Replicator::Create(&spec_, rc, shard_[s][i].get(), nets_[i]->Transport(s));
        EXPECT_TRUE(r.ok()) << r.status().ToString();
        repl_[s].push_back(std::move(r).value());
        nets_[i]->Attach(s, repl_[s][i]->receiver());
        shard_[s][i]->AttachReplication(repl_[s][i].get(), repl_[s][i]->gate());
      }
    }
    for (auto& site : repl_)
      for (auto& r : site) r->Start();
  }

  ~WanSites() {
    for (auto& site : repl_)
      for (auto& r : site) r->Stop();
    nets_.clear();  // no delivery into replicators from here on
    for (auto& site : shard_)
      for (auto& sh : site) sh->AttachReplication(nullptr, nullptr);
    repl_.clear();
  }

  int sites() const { return static_cast<int>(workers_.size()); }
  int total_workers() const {
    int t = 0;
    for (int w : workers_) t += w;
    return t;
  }
  datacenter::Shard* shard(SiteId s, int i) { return shard_[s][i].get(); }
  Replicator* replicator(SiteId s, int i) { return repl_[s][i].get(); }
  FakeWanNetwork* net(int i) { return nets_[i].get(); }
  const ModelSpec& spec() const { return spec_; }

  // Runs the counter workload on every worker of every site; worker 0 of
  // each site evaluates its own replica. Returns per site the evaluator's
  // counter_max_abs_error (nullopt when a worker failed).
  std::vector<std::optional<double>> RunCounter(int64_t clocks, int64_t staleness) {
    std::vector<std::future<Result<worker::TrainerReport>>> runs;
    std::vector<int> site_of;
    std::vector<std::unique_ptr<worker::LocalConnectionFactory>> factories;
    for (SiteId s = 0; s < sites(); ++s) {
      std::vector<datacenter::Shard*> ptrs;
      for (auto& sh : shard_[s]) ptrs.push_back(sh.get());
      factories.push_back(std::make_unique<worker::LocalConnectionFactory>(ptrs));
      for (int w = 0; w < workers_[s]; ++w) {
        worker::LocalConnectionFactory* f = factories.back().get();
        site_of.push_back(s);
        runs.push_back(std::async(std::launch::async, [this, f, w, clocks, staleness]() -> Result<worker::TrainerReport> {
          WorkerClientOptions co;
          co.worker_id = w;
          co.staleness = staleness;
          co.rpc_timeout_ms = 60000;
          GEOPS_ASSIGN_OR_RETURN(std::unique_ptr<worker::PsClient> client,
                                 worker::PsClient::Create(spec_, shards_, co, f));
          GEOPS_RETURN_IF_ERROR(client->Start());
          worker::TrainerOptions to;
          to.workload = "counter";
          to.shape = SmallShape();
          to.clocks = clocks;
          to.evaluator = (w == 0);
          to.counter_workers = total_workers();
          to.progress_every_seconds = 3600;
          return worker::RunTrainer(to, client.get(), nullptr);
        }));
      }
    }
    std::vector<std::optional<double>> errors(sites());
    std::vector<bool> failed(sites(), false);
    for (size_t k = 0; k < runs.size(); ++k) {
      Result<worker::TrainerReport> r = runs[k].get();
      EXPECT_TRUE(r.ok()) << "site " << site_of[k] << ": " << r.status().ToString();
      if (!r.ok()) {
        failed[site_of[k]] = true;
        continue;
      }
      if (r->counter_max_abs_error) errors[site_of[k]] = r->counter_max_abs_error;
    }
    for (int s = 0; s < sites(); ++s)
      if (failed[s]) errors[s].reset();
    return errors;
  }

 private:
  ModelSpec spec_;
  std::vector<int> workers_;
  int shards_;
  std::vector<std::unique_ptr<FakeWanNetwork>> nets_;
  std::vector<std::vector<std::unique_ptr<datacenter::Shard>>> shard_;
  std::vector<std::vector<std::unique_ptr<Replicator>>> repl_;
};

}  // namespace geops::wan::testing

#endif  // GEOPS_TESTS_WAN_WAN_SITES_H_
