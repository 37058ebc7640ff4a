#include "worker/trainer.h"

#include <algorithm>
#include <cmath>
#include <deque>

#include "common/deadline.h"
#include "common/decay.h"
#include "worker/background_eval.h"
#include "worker/compute_backend.h"
#include "worker/cpu_backend.h"
#include "worker/cuda/cuda_trainer_path.h"
#include "worker/cuda/cuda_worker.h"
#include "worker/dataset.h"
#include "worker/fashion_mnist.h"

namespace geops::worker {

Status TrainerOptions::Validate() const {
  if (workload != "mlp" && workload != "counter") {
    return InvalidArgumentError("workload must be \"mlp\" or \"counter\", got \"" + workload + "\"");
  }
  GEOPS_RETURN_IF_ERROR(ValidateMlpShape(shape));
  if (clocks < 1) return InvalidArgumentError("clocks must be >= 1");
  if (batch_size < 1) return InvalidArgumentError("batch_size must be >= 1");
  if (!(learning_rate > 0) || !std::isfinite(learning_rate)) {
    return InvalidArgumentError("learning_rate must be a positive number");
  }
  if (final_learning_rate >= 0 && !(final_learning_rate <= learning_rate)) {
    return InvalidArgumentError("final_learning_rate must be <= learning_rate");
  }
  if (eval_every < 0) return InvalidArgumentError("eval_every must be >= 0");
  if (data_workers < 1 || data_worker < 0 || data_worker >= data_workers) {
    return InvalidArgumentError("data_worker must be in [0, data_workers)");
  }
  if (counter_workers < 1) return InvalidArgumentError("counter_workers must be >= 1");
  return Status::Ok();
}

float TrainerOptions::LearningRateAt(Clock c) const {
  if (final_learning_rate < 0) return learning_rate;
  return static_cast<float>(HalfCosineDecay(learning_rate, final_learning_rate, c, clocks));
}

namespace {

// Emits progress at most every `period` seconds, averaging the loss between.
class ProgressMeter {
 public:
  ProgressMeter(TrainerObserver* observer, double period, double start)
      : observer_(observer), period_(period), start_(start), last_(start) {}

  void Step(Clock clock, double loss, int examples) {
    loss_sum_ += loss;
    ++steps_;
    examples_ += examples;
    recent_.push_back(loss);
    if (recent_.size() > 50) recent_.pop_front();
    const double now = NowSeconds();
    if (observer_ != nullptr && now - last_ >= period_) {
      observer_->OnProgress({clock, loss_sum_ / steps_, examples_ / (now - last_), now - start_});
      last_ = now;
      loss_sum_ = 0;
      steps_ = 0;
      examples_ = 0;
    }
  }

  std::optional<double> RecentLoss() const {
    if (recent_.empty()) return std::nullopt;
    double s = 0;
    for (double l : recent_) s += l;
    return s / recent_.size();
  }

 private:
  TrainerObserver* observer_;
  double period_, start_, last_;
  double loss_sum_ = 0;
  int64_t steps_ = 0;
  int64_t examples_ = 0;
  std::deque<double> recent_;
};

// The backend the options name; "auto" takes the GPU when one is built and present.
Result<std::unique_ptr<ComputeBackend>> NewBackend(const std::string& name, const MlpShape& shape,
                                                   int threads) {
  GEOPS_ASSIGN_OR_RETURN(BackendKind kind, ParseBackendKind(name));
  if (kind == BackendKind::kCuda || (kind == BackendKind::kAuto && cuda::CudaDeviceAvailable())) {
    return cuda::NewCudaBackend(shape);
  }
  return NewCpuBackend(shape, threads);
}

// The final model: reads at the last clock with staleness 0, so it waits
// for every worker of the site (and, across sites, for every site's final
// updates). A read that runs into its deadline is tried again until
// final_read_timeout_ms has passed.
Status FinalRead(PsClient* client, const TrainerOptions& o) {
  const Deadline until = Deadline::InMs(o.final_read_timeout_ms);
  while (true) {
    Status s = client->ReadAt(o.clocks, 0);
    if (s.ok() || s.code() != StatusCode::kDeadlineExceeded || until.Expired()) return s.WithContext("final read");
  }
}

// `gpu`, when set, evaluates the device copy of the client's cache.
Result<EvalInfo> Evaluate(ComputeBackend* backend, cuda::CudaTrainerPath* gpu, PsClient* client,
                          const Dataset& test, double start) {
  const double began = NowSeconds();
  auto eval = gpu != nullptr ? gpu->Evaluate(test.AsBatch())
                             : backend->Evaluate(client->tables(), test.AsBatch());
  if (!eval.ok()) return eval.status().WithContext("evaluation");
  const double ended = NowSeconds();
  return EvalInfo{client->clock(), eval->accuracy, eval->loss, ended - start, ended - began, ended - began};
}

// Hands a background evaluation's result, if any, to the observer, dated
// now (`start`: Run's start).
Status ReportEval(std::optional<Result<EvalInfo>> got, TrainerObserver* observer, double start) {
  if (!got.has_value()) return Status::Ok();
  if (!got->ok()) return got->status();
  EvalInfo info = **got;
  const double now = NowSeconds() - start;
  info.model_age_seconds += std::max(0.0, now - info.t);
  info.t = now;
  if (observer) observer->OnEval(info);
  return Status::Ok();
}

Result<TrainerReport> RunMlp(const TrainerOptions& o, PsClient* client, TrainerObserver* observer) {
  const double start = NowSeconds();
  GEOPS_ASSIGN_OR_RETURN(Dataset train, LoadFashionMnistShare(o.data_dir, FashionMnistSplit::kTrain,
                                                              o.data_worker, o.data_workers));
  Dataset test;
  if (o.evaluator) {
    GEOPS_ASSIGN_OR_RETURN(test, LoadFashionMnist(o.data_dir, FashionMnistSplit::kTest));
  }
  GEOPS_ASSIGN_OR_RETURN(std::unique_ptr<ComputeBackend> backend,
                         NewBackend(o.backend, o.shape, o.compute_threads));
  // A CUDA backend steps through the GPU parameter cache, which re-uploads
  // tables only when the client's cache changed; null for other backends.
  GEOPS_ASSIGN_OR_RETURN(std::unique_ptr<cuda::CudaTrainerPath> gpu,
                         cuda::CudaTrainerPath::ForBackend(backend.get(), client));

  // The data position follows from the clock, so a resumed worker continues.
  GEOPS_ASSIGN_OR_RETURN(BatchSampler sampler,
                         BatchSampler::Create(&train, o.batch_size, o.seed, o.data_worker));
  const int64_t per_epoch = sampler.batches_per_epoch();
  const Clock first = client->clock();
  GEOPS_RETURN_IF_ERROR(sampler.Seek({first / per_epoch, (first % per_epoch) * o.batch_size}));

  // Evaluations during training on a copy of the cache, in a thread of
  // their own with a backend of their own (CPU only: the CUDA path
  // evaluates its device copy in line).
  std::unique_ptr<BackgroundEval> background;
  if (o.evaluator && o.background_eval && o.eval_every > 0 && gpu == nullptr) {
    GEOPS_ASSIGN_OR_RETURN(std::unique_ptr<ComputeBackend> eval_backend,
                           NewCpuBackend(o.shape, o.compute_threads));
    background = std::make_unique<BackgroundEval>(std::move(eval_backend), &test, start);
  }

  TrainerReport report;
  ProgressMeter meter(observer, o.progress_every_seconds, start);
  for (Clock c = first; c < o.clocks; ++c) {
    GEOPS_RETURN_IF_ERROR(client->Refresh().WithContext("read at clock " + std::to_string(c)));
    if (o.evaluator && o.eval_every > 0 && c > first && c % o.eval_every == 0) {
      if (background) {
        GEOPS_RETURN_IF_ERROR(
            ReportEval(background->Start(client->clock(), client->tables()), observer, start));
      } else {
        GEOPS_ASSIGN_OR_RETURN(EvalInfo info, Evaluate(backend.get(), gpu.get(), client, test, start));
        if (observer) observer->OnEval(info);
      }
    }
    Batch batch = sampler.Next();
    auto step = gpu != nullptr ? gpu->TrainStep(batch, o.LearningRateAt(c))
                               : backend->TrainStep(client->tables(), batch, o.LearningRateAt(c),
                                                    client->deltas());
    if (!step.ok()) return step.status().WithContext("training step at clock " + std::to_string(c));
    client->MarkAllDirty();
    GEOPS_RETURN_IF_ERROR(client->Clock(c + 1 == o.clocks)
                              .WithContext("flush of clock " + std::to_string(c)));
    report.examples += batch.n;
    meter.Step(c, step->loss, batch.n);
    if (background) GEOPS_RETURN_IF_ERROR(ReportEval(background->Take(), observer, start));
  }
  if (background) GEOPS_RETURN_IF_ERROR(ReportEval(background->Wait(), observer, start));
  report.final_loss = meter.RecentLoss();
  if (o.evaluator) {
    // The final model: wait until every worker has finished every clock.
    if (observer) observer->OnFinalRead(o.clocks);
    GEOPS_RETURN_IF_ERROR(FinalRead(client, o));
    GEOPS_ASSIGN_OR_RETURN(EvalInfo info, Evaluate(backend.get(), gpu.get(), client, test, start));
    if (observer) observer->OnEval(info);
    report.test_accuracy = info.test_accuracy;
    report.test_loss = info.test_loss;
  }
  report.clocks = o.clocks;
  report.wall_seconds = NowSeconds() - start;
  report.client = client->stats();
  return report;
}

Result<TrainerReport> RunCounter(const TrainerOptions& o, PsClient* client,
                                 TrainerObserver* observer) {
  const double start = NowSeconds();
  const ModelSpec& spec = client->spec();
  TrainerReport report;
  ProgressMeter meter(observer, o.progress_every_seconds, start);
  for (Clock c = client->clock(); c < o.clocks; ++c) {
    GEOPS_RETURN_IF_ERROR(client->Refresh().WithContext("read at clock " + std::to_string(c)));
    for (TableId t = 0; t < static_cast<TableId>(spec.num_tables()); ++t) {
      float* d = client->delta(t);
      std::fill(d, d + spec.table(t).rows * spec.table(t).cols, 1.0f);
    }
    client->MarkAllDirty();
    GEOPS_RETURN_IF_ERROR(client->Clock(c + 1 == o.clocks)
                              .WithContext("flush of clock " + std::to_string(c)));
    meter.Step(c, 0.0, 0);
  }
  if (o.evaluator) {
    if (observer) observer->OnFinalRead(o.clocks);
    GEOPS_RETURN_IF_ERROR(FinalRead(client, o));
    const double expected = static_cast<double>(o.counter_workers) * o.clocks;
    double max_err = 0;
    for (TableId t = 0; t < static_cast<TableId>(spec.num_tables()); ++t) {
      const float* v = client->table(t);
      const int64_t n = spec.table(t).rows * spec.table(t).cols;
      for (int64_t i = 0; i < n; ++i) max_err = std::max(max_err, std::abs(double{v[i]} - expected));
    }
    report.counter_expected = expected;
    report.counter_max_abs_error = max_err;
  }
  report.clocks = o.clocks;
  report.wall_seconds = NowSeconds() - start;
  report.client = client->stats();
  return report;
}

}  // namespace

Result<TrainerReport> RunTrainer(const TrainerOptions& options, PsClient* client,
                                 TrainerObserver* observer) {
  GEOPS_RETURN_IF_ERROR(options.Validate());
  if (client == nullptr) return InvalidArgumentError("RunTrainer needs a client");
  if (options.workload == "counter") return RunCounter(options, client, observer);
  return RunMlp(options, client, observer);
}

}  // namespace geops::worker
