// BackgroundEval: the evaluator's test-set evaluations during training, on
// a copy of the model in a thread of their own, so that the worker's clocks
// go on while one runs (TrainerOptions::background_eval).
//
// A worker that evaluates in line stops its clocks for the evaluation, and
// through the SSP bound so do its site's other workers a few clocks later;
// across sites its peers run ahead to the drift bound meanwhile. Here the
// worker copies its cache (one copy of the model) and goes on; the copy is
// evaluated with a compute backend of its own. One evaluation at a time:
// Start waits for the one before, so a test set larger than eval_every
// clocks of training slows the worker instead of piling up copies.
//
// Thread-safety: one thread calls Start, Take and Wait; the evaluation
// thread touches only the copy, the test set and its own backend.
#ifndef GEOPS_WORKER_BACKGROUND_EVAL_H_
#define GEOPS_WORKER_BACKGROUND_EVAL_H_

#include <atomic>
#include <memory>
#include <optional>
#include <span>
#include <thread>
#include <vector>

#include "common/status.h"
#include "worker/compute_backend.h"
#include "worker/dataset.h"
#include "worker/trainer.h"

namespace geops::worker {

class BackgroundEval {
 public:
  // `backend` evaluates the copies; `test` must outlive this object;
  // `start` is the trainer's start (NowSeconds) for EvalInfo::t.
  BackgroundEval(std::unique_ptr<ComputeBackend> backend, const Dataset* test, double start);
  ~BackgroundEval();
  BackgroundEval(const BackgroundEval&) = delete;
  BackgroundEval& operator=(const BackgroundEval&) = delete;

  // Copies `tables` (the backend's MLP tables, in ModelSpec order) and
  // starts evaluating them as the model of `clock`; a wrong number of tables
  // is that evaluation's InvalidArgument. Waits for a running evaluation
  // first and returns its result, if there was one not taken yet.
  std::optional<Result<EvalInfo>> Start(Clock clock, std::span<const float* const> tables);
  // The result of a finished evaluation not taken yet; nullopt while one
  // runs or when there is none.
  std::optional<Result<EvalInfo>> Take();
  // Waits for a running evaluation; its result (or a refused Start's error)
  // if not taken yet, else nullopt.
  std::optional<Result<EvalInfo>> Wait();

 private:
  std::unique_ptr<ComputeBackend> backend_;
  const Dataset* test_;
  double start_;
  std::vector<int64_t> sizes_;  // floats per table, from the backend's shape
  std::vector<std::vector<float>> copy_;
  std::vector<const float*> copy_ptrs_;
  std::thread thread_;
  std::atomic<bool> done_{false};
  std::optional<Result<EvalInfo>> result_;  // written by the thread before done_
};

}  // namespace geops::worker

#endif  // GEOPS_WORKER_BACKGROUND_EVAL_H_
