#include "worker/dataset.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "common/splitmix.h"

namespace geops::worker {

Status CheckShare(int64_t n, int worker, int num_workers) {
  if (num_workers < 1) {
    return InvalidArgumentError("num_workers must be >= 1, got " + std::to_string(num_workers));
  }
  if (worker < 0 || worker >= num_workers) {
    return InvalidArgumentError("worker " + std::to_string(worker) + " is outside [0, " +
                                std::to_string(num_workers) + ")");
  }
  if (n <= worker) {
    return InvalidArgumentError("dataset of " + std::to_string(n) + " examples leaves worker " +
                                std::to_string(worker) + " of " + std::to_string(num_workers) + " nothing");
  }
  return Status::Ok();
}

Result<Dataset> PartitionDataset(const Dataset& data, int worker, int num_workers) {
  GEOPS_RETURN_IF_ERROR(CheckShare(data.n, worker, num_workers));
  Dataset out;
  out.dims = data.dims;
  out.num_classes = data.num_classes;
  out.n = (data.n - worker + num_workers - 1) / num_workers;
  out.x.resize(static_cast<size_t>(out.n * out.dims));
  out.y.resize(static_cast<size_t>(out.n));
  for (int64_t j = 0; j < out.n; ++j) {
    const int64_t i = worker + j * num_workers;
    std::memcpy(out.x.data() + j * out.dims, data.x.data() + i * data.dims,
                sizeof(float) * static_cast<size_t>(data.dims));
    out.y[j] = data.y[i];
  }
  return out;
}

BatchSampler::BatchSampler(const Dataset* data, int batch_size, uint64_t seed, WorkerId worker)
    : data_(data), batch_size_(batch_size), seed_(seed), worker_(worker) {
  order_.resize(static_cast<size_t>(data->n));
  x_.resize(static_cast<size_t>(batch_size) * data->dims);
  y_.resize(static_cast<size_t>(batch_size));
}

Result<BatchSampler> BatchSampler::Create(const Dataset* data, int batch_size, uint64_t seed,
                                          WorkerId worker, DataPosition start) {
  if (data == nullptr || data->n < 1) return InvalidArgumentError("cannot sample an empty dataset");
  if (batch_size < 1 || batch_size > data->n) {
    return InvalidArgumentError("batch size " + std::to_string(batch_size) + " is outside [1, " +
                                std::to_string(data->n) + "] for this dataset");
  }
  BatchSampler sampler(data, batch_size, seed, worker);
  sampler.pos_.epoch = -1;  // forces the first shuffle
  GEOPS_RETURN_IF_ERROR(sampler.Seek(start));
  return sampler;
}

void BatchSampler::Shuffle(int64_t epoch) {
  uint64_t state = seed_ ^ 0x6a09e667f3bcc909ull;
  state = SplitMix64(&state) ^ (static_cast<uint64_t>(static_cast<uint32_t>(worker_)) * 0x2545f4914f6cdd1dull);
  state = SplitMix64(&state) ^ (static_cast<uint64_t>(epoch) * 0x9e3779b97f4a7c15ull);
  SplitMix64(&state);
  const int64_t n = data_->n;
  for (int64_t i = 0; i < n; ++i) order_[i] = i;
  for (int64_t i = n - 1; i > 0; --i) {
    const int64_t j = static_cast<int64_t>(SplitMixBelow(&state, static_cast<uint64_t>(i + 1)));
    std::swap(order_[i], order_[j]);
  }
}

Status BatchSampler::Seek(DataPosition pos) {
  if (pos.epoch < 0 || pos.index < 0 || pos.index > data_->n) {
    return InvalidArgumentError("data position (epoch " + std::to_string(pos.epoch) + ", index " +
                                std::to_string(pos.index) + ") is invalid for a dataset of " +
                                std::to_string(data_->n) + " examples");
  }
  // Normalise: a position with no full batch left is the start of the next epoch.
  if (pos.index + batch_size_ > data_->n) pos = DataPosition{pos.epoch + 1, 0};
  if (pos.epoch != pos_.epoch) Shuffle(pos.epoch);
  pos_ = pos;
  return Status::Ok();
}

Batch BatchSampler::Next() {
  const int dims = data_->dims;
  for (int k = 0; k < batch_size_; ++k) {
    const int64_t i = order_[pos_.index + k];
    std::memcpy(x_.data() + static_cast<size_t>(k) * dims, data_->x.data() + i * dims,
                sizeof(float) * static_cast<size_t>(dims));
    y_[k] = data_->y[i];
  }
  pos_.index += batch_size_;
  if (pos_.index + batch_size_ > data_->n) {
    pos_ = DataPosition{pos_.epoch + 1, 0};
    Shuffle(pos_.epoch);
  }
  return Batch{x_.data(), y_.data(), batch_size_};
}

}  // namespace geops::worker
