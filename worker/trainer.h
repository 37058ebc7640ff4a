// Trainer: the training loop of one worker process.
//
// Two workloads run through the same PsClient:
//   "mlp"      Fashion-MNIST with an MLP: each clock, refresh the cache
//              (SSP), compute one minibatch step on this worker's share of
//              the training set, ship -lr * gradient. The evaluator (one
//              worker per deployment) measures test accuracy every
//              eval_every clocks and, at the end, on the exact final model.
//              With background_eval (CPU backend) an evaluation during
//              training runs on a copy of the cache in a thread of its
//              own, so the evaluator's clocks go on meanwhile.
//   "counter"  every worker adds exactly 1.0 to every parameter each clock;
//              at the end the evaluator reads the final model (waiting for
//              every worker) and checks each value equals
//              counter_workers * clocks. Any lost or doubled update shows.
// A worker resumes at the clock its shards hold for it, and its data
// position follows from that clock, so a restarted worker continues where it
// stopped.
//
// Thread-safety: one Trainer is driven by one thread; the observer is
// called from that thread only.
#ifndef GEOPS_WORKER_TRAINER_H_
#define GEOPS_WORKER_TRAINER_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "common/status.h"
#include "worker/mlp_model.h"
#include "worker/ps_client.h"

namespace geops::worker {

struct TrainerOptions {
  std::string workload = "mlp";   // "mlp" or "counter"
  MlpShape shape;                 // tables of the model (both workloads)
  int64_t clocks = 1000;          // iterations to run
  int batch_size = 32;            // examples per clock
  float learning_rate = 0.025f;   // deltas = -learning_rate * gradient, at clock 0
  // Learning rate at the last clock; in between it follows a half cosine.
  // Negative (the default) keeps learning_rate constant.
  float final_learning_rate = -1.0f;
  int64_t eval_every = 250;       // clocks between evaluations (evaluator only; 0 = end only)
  bool evaluator = false;         // evaluates and checks the final model
  // Evaluations during training run on a copy of the cache in a thread of
  // their own, one at a time, while the worker trains on (CPU backend; the
  // CUDA path and the final model's evaluation run in line). Off: the
  // worker stops for each, and through SSP so do the site's other workers.
  bool background_eval = true;
  int data_worker = 0;            // this worker's index for data partitioning
  int data_workers = 1;           // workers sharing the training set
  int counter_workers = 1;        // workers adding to the counter (expected value)
  uint64_t seed = 1;              // data order
  std::string data_dir = "/usr/share/datasets/fashion-mnist";
  std::string backend = "cpu";    // "cpu", "cuda" or "auto"
  int compute_threads = 1;        // BLAS threads
  double progress_every_seconds = 0.5;  // how often OnProgress fires
  int64_t final_read_timeout_ms = 600000;  // evaluator's wait for the slowest worker

  Status Validate() const;
  // The learning rate of clock `c`.
  float LearningRateAt(Clock c) const;
};

struct ProgressInfo {
  Clock clock = 0;
  double loss = 0;           // mean training loss since the last report (mlp)
  double examples_per_sec = 0;
  double t = 0;              // seconds since Run() began
};

struct EvalInfo {
  Clock clock = 0;           // the model of this clock (the cache as the clock began)
  double test_accuracy = 0;
  double test_loss = 0;
  double t = 0;              // seconds since Run() began, when the result is reported
  double seconds = 0;        // the evaluation's own duration
  // How long before `t` the evaluated model was taken: the evaluation, and
  // for a background one the clocks until its result was picked up. The
  // model existed at t - model_age_seconds (what time to target counts).
  double model_age_seconds = 0;
};

struct TrainerReport {
  Clock clocks = 0;
  double wall_seconds = 0;
  std::optional<double> final_loss;      // mean training loss of the last clocks (mlp)
  std::optional<double> test_accuracy;   // evaluator, mlp: on the final model
  std::optional<double> test_loss;
  std::optional<double> counter_expected;       // evaluator, counter
  std::optional<double> counter_max_abs_error;  // evaluator, counter
  int64_t examples = 0;
  PsClientStats client;
};

class TrainerObserver {
 public:
  virtual ~TrainerObserver() = default;
  virtual void OnProgress(const ProgressInfo& info) = 0;
  virtual void OnEval(const EvalInfo& info) = 0;
  // Training is done; the evaluator now reads the final model, which waits
  // for every worker of the site and every site's drain.
  virtual void OnFinalRead(Clock clock) {}
};

// Runs the workload to the end. `client` must be started (PsClient::Start).
// Errors name the stage that failed (data load, compute, a shard call).
Result<TrainerReport> RunTrainer(const TrainerOptions& options, PsClient* client,
                                 TrainerObserver* observer);

}  // namespace geops::worker

#endif  // GEOPS_WORKER_TRAINER_H_
