#include "worker/trainer.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <thread>

#include "tests/worker/local_connection.h"
#include "worker/mlp_model.h"

namespace geops::worker {
namespace {

struct RecordingObserver : TrainerObserver {
  void OnProgress(const ProgressInfo& p) override { progress.push_back(p); }
  void OnEval(const EvalInfo& e) override { evals.push_back(e); }
  std::vector<ProgressInfo> progress;
  std::vector<EvalInfo> evals;
};

// Runs `workers` trainers in threads against `shards` in-process shards.
std::vector<Result<TrainerReport>> RunSite(const ModelSpec& spec, int shards, int workers,
                                           TrainerOptions base, RecordingObserver* observer) {
  std::vector<std::unique_ptr<datacenter::Shard>> owned;
  std::vector<datacenter::Shard*> raw;
  for (int s = 0; s < shards; ++s) {
    ShardOptions o;
    o.shard_id = s;
    o.num_shards = shards;
    o.num_workers = workers;
    owned.push_back(std::move(datacenter::Shard::Create(spec, o)).value());
    raw.push_back(owned.back().get());
  }
  LocalConnectionFactory factory(raw);
  std::vector<Result<TrainerReport>> reports(workers, Result<TrainerReport>(InternalError("not run")));
  std::vector<std::thread> threads;
  for (int w = 0; w < workers; ++w) {
    threads.emplace_back([&, w] {
      WorkerClientOptions co;
      co.worker_id = w;
      co.staleness = 1;
      auto client = PsClient::Create(spec, shards, co, &factory);
      ASSERT_TRUE(client.ok());
      ASSERT_TRUE((*client)->Start().ok());
      TrainerOptions o = base;
      o.evaluator = (w == 0);
      o.data_worker = w;
      o.data_workers = workers;
      o.counter_workers = workers;
      reports[w] = RunTrainer(o, client->get(), w == 0 ? observer : nullptr);
    });
  }
  for (auto& t : threads) t.join();
  return reports;
}

TEST(TrainerTest, CounterWorkloadIsExact) {
  MlpShape shape{{30, 20, 5}};
  std::vector<TableSpec> tables = MlpTables(shape);
  for (auto& t : tables) t.init = InitKind::kZeros;
  auto spec = ModelSpec::Create(tables, 256);
  ASSERT_TRUE(spec.ok());
  TrainerOptions o;
  o.workload = "counter";
  o.shape = shape;
  o.clocks = 25;
  auto reports = RunSite(*spec, 2, 3, o, nullptr);
  ASSERT_TRUE(reports[0].ok()) << reports[0].status().ToString();
  EXPECT_EQ(*reports[0]->counter_expected, 75.0);
  EXPECT_EQ(*reports[0]->counter_max_abs_error, 0.0);
  ASSERT_TRUE(reports[1].ok());
  EXPECT_FALSE(reports[1]->counter_expected.has_value());
}

TEST(TrainerTest, RejectsBadOptions) {
  TrainerOptions o;
  o.workload = "resnet";
  EXPECT_EQ(o.Validate().code(), StatusCode::kInvalidArgument);
  o.workload = "mlp";
  o.clocks = 0;
  EXPECT_EQ(o.Validate().code(), StatusCode::kInvalidArgument);
  o.clocks = 5;
  o.data_worker = 3;
  o.data_workers = 2;
  EXPECT_EQ(o.Validate().code(), StatusCode::kInvalidArgument);
}

TEST(TrainerTest, MissingDatasetIsNotFound) {
  MlpShape shape{{784, 16, 10}};
  auto spec = MlpModelSpec(shape);
  ASSERT_TRUE(spec.ok());
  TrainerOptions o;
  o.shape = shape;
  o.clocks = 3;
  o.data_dir = "/nonexistent-dataset-dir";
  auto reports = RunSite(*spec, 1, 1, o, nullptr);
  EXPECT_EQ(reports[0].status().code(), StatusCode::kNotFound) << reports[0].status().ToString();
}

TEST(TrainerTest, MlpLearnsFashionMnistThroughTheShards) {
  if (!std::filesystem::exists("/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz")) {
    GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  }
  MlpShape shape{{784, 64, 10}};
  auto spec = MlpModelSpec(shape);
  ASSERT_TRUE(spec.ok());
  TrainerOptions o;
  o.shape = shape;
  o.clocks = 600;
  o.batch_size = 32;
  o.learning_rate = 0.1f;
  o.final_learning_rate = 0.01f;
  o.eval_every = 300;
  o.progress_every_seconds = 0;
  RecordingObserver observer;
  auto reports = RunSite(*spec, 2, 2, o, &observer);
  ASSERT_TRUE(reports[0].ok()) << reports[0].status().ToString();
  ASSERT_TRUE(reports[1].ok()) << reports[1].status().ToString();
  EXPECT_GE(*reports[0]->test_accuracy, 0.78);
  EXPECT_LT(*reports[0]->final_loss, 0.8);
  EXPECT_EQ(reports[0]->examples, 600 * 32);
  ASSERT_EQ(observer.evals.size(), 2u);  // clock 300 and the final model
  EXPECT_EQ(observer.evals[0].clock, 300);  // in a thread of its own (background_eval)
  EXPECT_GT(observer.evals[0].seconds, 0.0);
  EXPECT_GE(observer.evals[0].test_accuracy, 0.7);
  EXPECT_EQ(observer.evals[1].clock, 600);
  EXPECT_FALSE(observer.progress.empty());
}

}  // namespace
}  // namespace geops::worker

namespace geops::worker {
namespace {

TEST(TrainerOptionsTest, CosineScheduleRunsFromFirstToFinalRate) {
  TrainerOptions o;
  o.clocks = 101;
  o.learning_rate = 0.1f;
  EXPECT_FLOAT_EQ(o.LearningRateAt(50), 0.1f);  // constant by default
  o.final_learning_rate = 0.01f;
  EXPECT_FLOAT_EQ(o.LearningRateAt(0), 0.1f);
  EXPECT_NEAR(o.LearningRateAt(50), 0.055f, 1e-6);
  EXPECT_FLOAT_EQ(o.LearningRateAt(100), 0.01f);
  o.final_learning_rate = 0.2f;
  EXPECT_EQ(o.Validate().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace geops::worker
