// Tests of BackgroundEval: evaluations on a copy of the model, in a thread
// of their own, while the caller changes its tables.
#include "worker/background_eval.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "common/deadline.h"
#include "worker/cpu_backend.h"

namespace geops::worker {
namespace {

struct Fixture {
  MlpShape shape{{6, 5, 3}};
  std::vector<std::vector<float>> tables;
  std::vector<const float*> ptrs;
  Dataset test;

  Fixture() {
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (int i = 0; i < shape.num_layers(); ++i) {
      tables.emplace_back(static_cast<size_t>(shape.sizes[i]) * shape.sizes[i + 1]);
      tables.emplace_back(shape.sizes[i + 1]);
    }
    for (auto& t : tables) {
      for (float& v : t) v = u(rng);
      ptrs.push_back(t.data());
    }
    test.n = 200;
    test.dims = 6;
    test.num_classes = 3;
    for (int i = 0; i < test.n * test.dims; ++i) test.x.push_back(u(rng));
    for (int i = 0; i < test.n; ++i) test.y.push_back(i % 3);
  }

  EvalStats InLine() {
    auto backend = NewCpuBackend(shape, 1);
    EXPECT_TRUE(backend.ok());
    auto stats = (*backend)->Evaluate(ptrs, test.AsBatch());
    EXPECT_TRUE(stats.ok()) << stats.status().ToString();
    return *stats;
  }
};

std::unique_ptr<BackgroundEval> Make(Fixture& f) {
  auto backend = NewCpuBackend(f.shape, 1);
  EXPECT_TRUE(backend.ok());
  return std::make_unique<BackgroundEval>(std::move(*backend), &f.test, NowSeconds());
}

// The evaluation sees the model as it was at Start: changing the tables
// right after (as the worker's next step does) changes nothing of it.
TEST(BackgroundEvalTest, EvaluatesTheModelAsOfStart) {
  Fixture f;
  const EvalStats expected = f.InLine();
  auto eval = Make(f);
  EXPECT_FALSE(eval->Start(40, f.ptrs).has_value());  // nothing before it
  for (auto& t : f.tables) std::fill(t.begin(), t.end(), 0.0f);
  std::optional<Result<EvalInfo>> got = eval->Wait();
  ASSERT_TRUE(got.has_value());
  ASSERT_TRUE(got->ok()) << got->status().ToString();
  EXPECT_EQ((*got)->clock, 40);
  EXPECT_EQ((*got)->test_accuracy, expected.accuracy);
  EXPECT_EQ((*got)->test_loss, expected.loss);
  EXPECT_GE((*got)->seconds, 0.0);
  EXPECT_GE((*got)->t, (*got)->seconds);
  EXPECT_FALSE(eval->Wait().has_value());  // taken once
  EXPECT_FALSE(eval->Take().has_value());
}

// A Start while one runs waits for it and hands back its result; Take
// returns a finished one once and nothing while none finished.
TEST(BackgroundEvalTest, OneAtATimeEachResultOnce) {
  Fixture f;
  auto eval = Make(f);
  EXPECT_FALSE(eval->Take().has_value());
  eval->Start(10, f.ptrs);
  std::optional<Result<EvalInfo>> first = eval->Start(20, f.ptrs);
  ASSERT_TRUE(first.has_value());
  ASSERT_TRUE(first->ok());
  EXPECT_EQ((*first)->clock, 10);
  std::optional<Result<EvalInfo>> second;
  for (int i = 0; i < 5000 && !second.has_value(); ++i) {  // bounded: 5 s
    second = eval->Take();
    if (!second.has_value()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_TRUE(second.has_value());
  ASSERT_TRUE(second->ok());
  EXPECT_EQ((*second)->clock, 20);
  EXPECT_FALSE(eval->Take().has_value());
}

// A model of the wrong number of tables comes back as an error naming the
// clock, without reading past what it was given.
TEST(BackgroundEvalTest, AFailedEvaluationIsAnErrorNamingItsClock) {
  Fixture f;
  auto eval = Make(f);
  std::vector<const float*> too_few(f.ptrs.begin(), f.ptrs.end() - 1);
  eval->Start(30, too_few);
  std::optional<Result<EvalInfo>> got = eval->Wait();
  ASSERT_TRUE(got.has_value());
  EXPECT_FALSE(got->ok());
  EXPECT_NE(got->status().message().find("evaluation of clock 30"), std::string::npos) << got->status().ToString();

  std::vector<const float*> too_many = f.ptrs;
  too_many.push_back(f.ptrs.back());
  eval->Start(31, too_many);
  got = eval->Take();  // refused at once: nothing runs
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(got->status().message().find("evaluation of clock 31: got 5 parameter tables"), std::string::npos)
      << got->status().ToString();
}

}  // namespace
}  // namespace geops::worker
