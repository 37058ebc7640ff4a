#include "worker/background_eval.h"

#include <algorithm>

#include "common/deadline.h"
#include "worker/mlp_model.h"

namespace geops::worker {

BackgroundEval::BackgroundEval(std::unique_ptr<ComputeBackend> backend, const Dataset* test, double start)
    : backend_(std::move(backend)), test_(test), start_(start) {
  for (const TableSpec& t : MlpTables(backend_->shape())) sizes_.push_back(t.rows * t.cols);
}

BackgroundEval::~BackgroundEval() {
  if (thread_.joinable()) thread_.join();
}

std::optional<Result<EvalInfo>> BackgroundEval::Start(Clock clock, std::span<const float* const> tables) {
  std::optional<Result<EvalInfo>> before = Wait();
  if (tables.size() != sizes_.size()) {
    result_ = Result<EvalInfo>(InvalidArgumentError(
        "evaluation of clock " + std::to_string(clock) + ": got " + std::to_string(tables.size()) +
        " parameter tables; MLP " + backend_->shape().ToString() + " has " + std::to_string(sizes_.size())));
    return before;
  }
  copy_.resize(tables.size());
  copy_ptrs_.resize(tables.size());
  for (size_t i = 0; i < tables.size(); ++i) {
    copy_[i].assign(tables[i], tables[i] + sizes_[i]);
    copy_ptrs_[i] = copy_[i].data();
  }
  done_.store(false, std::memory_order_relaxed);
  thread_ = std::thread([this, clock] {
    const double began = NowSeconds();
    Result<EvalStats> eval = backend_->Evaluate(copy_ptrs_, test_->AsBatch());
    const double ended = NowSeconds();
    if (eval.ok()) {
      result_ = EvalInfo{clock, eval->accuracy, eval->loss, ended - start_, ended - began, ended - began};
    } else {
      result_ = Result<EvalInfo>(eval.status().WithContext("evaluation of clock " + std::to_string(clock)));
    }
    done_.store(true, std::memory_order_release);
  });
  return before;
}

std::optional<Result<EvalInfo>> BackgroundEval::Take() {
  if (thread_.joinable() && !done_.load(std::memory_order_acquire)) return std::nullopt;
  return Wait();
}

std::optional<Result<EvalInfo>> BackgroundEval::Wait() {
  if (thread_.joinable()) thread_.join();
  std::optional<Result<EvalInfo>> out = std::move(result_);
  result_.reset();
  return out;
}

}  // namespace geops::worker
