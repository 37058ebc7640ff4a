// gpu_step: the step time of a GPU worker training an MLP through geops
// (GPU parameter cache + PsClient + an in-process shard) against the same
// cuBLAS training loop with no parameter server (tables and SGD on the
// device, nothing crossing PCIe but the batch). Design target: geops keeps
// >= 90% of the standalone speed.
//
//   gpu_step [--steps=N] [--warmup=N] [--shards=N]
//
// Rows: MLP shape x batch size. Columns: ms per step standalone; ms per step
// through geops with staleness 0 (BSP: every clock reads the shard, so every
// table is uploaded) and with staleness 3 (SSP: most clocks are cache hits
// and fold the worker's own update on the device); each geops column is
// followed by its speed as a percentage of standalone. Without a CUDA device
// it prints "no CUDA device: ..." and exits 0.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/deadline.h"
#include "datacenter/shard.h"
#include "worker/cuda/cuda_backend.h"
#include "worker/cuda/cuda_status.h"
#include "worker/cuda/cuda_trainer_path.h"
#include "worker/cuda/mlp_kernels.h"
#include "worker/dataset.h"
#include "worker/ps_client.h"

namespace geops::bench {
namespace {

using worker::Batch;
using worker::Dataset;
using worker::MlpShape;

// ShardConnection straight onto in-process shards: no transport at all, so
// the geops column measures the worker side (cache, op-log, copies, shard
// apply), not a network.
class InProcessConnection final : public worker::ShardConnection {
 public:
  using worker::ShardConnection::Update;
  explicit InProcessConnection(datacenter::Shard* shard) : shard_(shard) {}
  Result<RegisterReply> Register(WorkerId w, uint64_t fp, const std::string& token,
                                 const WorkerSession& session = {}) override {
    return shard_->RegisterWorker(w, fp, token, session);
  }
  Result<ReadReply> Read(WorkerId w, Clock c, int64_t s, std::span<const ChunkKey> keys, float* out,
                         int64_t deadline_ms) override {
    return shard_->Read(w, c, s, keys, out, Deadline::InMs(deadline_ms));
  }
  Result<UpdateReply> Update(WorkerId w, Clock c, std::span<const ChunkKey> keys,
                             std::span<const float> values, int32_t part) override {
    return shard_->Update(w, c, keys, values, part);
  }
  Result<Clock> AdvanceClock(WorkerId w, Clock c, bool finished) override {
    return shard_->AdvanceClock(w, c, finished);
  }
  Status Heartbeat(WorkerId w, uint64_t session = 0) override { return shard_->Heartbeat(w, session); }
  Result<ShardStatus> GetStatus() override { return shard_->GetStatus(); }
  Result<SchemaReply> RegisterSchema(WorkerId, const ModelSpec&, const std::string&) override {
    return UnimplementedError("the benchmark's in-process connection serves built-in models only");
  }
  Result<int64_t> InitValues(WorkerId, uint64_t, std::span<const ChunkKey>, std::span<const float>,
                             const std::string&) override {
    return UnimplementedError("the benchmark's in-process connection serves built-in models only");
  }
  worker::TransferStats stats() const override { return {}; }

 private:
  datacenter::Shard* shard_;
};

class InProcessFactory final : public worker::ShardConnectionFactory {
 public:
  explicit InProcessFactory(std::vector<datacenter::Shard*> shards) : shards_(std::move(shards)) {}
  Result<std::unique_ptr<worker::ShardConnection>> Connect(ShardId s) override {
    return std::unique_ptr<worker::ShardConnection>(new InProcessConnection(shards_[s]));
  }

 private:
  std::vector<datacenter::Shard*> shards_;
};

// The standalone loop's tables: resident on the device, updated there.
class ResidentTables final : public worker::cuda::DeviceTableSource {
 public:
  Status Init(const std::vector<std::vector<float>>& tables) {
    for (const auto& t : tables) {
      const int64_t bytes = static_cast<int64_t>(t.size() * sizeof(float));
      GEOPS_ASSIGN_OR_RETURN(auto p, worker::cuda::DeviceBuffer::Allocate(bytes, "a table"));
      GEOPS_ASSIGN_OR_RETURN(auto d, worker::cuda::DeviceBuffer::Allocate(bytes, "an update"));
      GEOPS_CUDA_RETURN_IF_ERROR(cudaMemcpy(p.data(), t.data(), bytes, cudaMemcpyHostToDevice));
      elems_.push_back(static_cast<int64_t>(t.size()));
      params_.push_back(std::move(p));
      deltas_.push_back(std::move(d));
    }
    // A pageable cudaMemcpy may return before its DMA lands; the loop's
    // stream does not order after the legacy stream, so wait here.
    GEOPS_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
    return Status::Ok();
  }
  Result<const float*> Acquire(int t, cudaStream_t) override {
    return static_cast<const float*>(params_[t].floats());
  }
  Status Release(int, cudaStream_t) override { return Status::Ok(); }
  Result<float*> DeltaBuffer(int t, cudaStream_t) override { return deltas_[t].floats(); }
  Status DeltaDone(int, cudaStream_t) override { return Status::Ok(); }
  // SGD on the device: every table += its update (on `stream`, after the step).
  Status Apply(cudaStream_t stream) {
    for (size_t t = 0; t < params_.size(); ++t) {
      GEOPS_RETURN_IF_ERROR(
          worker::cuda::AddInPlace(params_[t].floats(), deltas_[t].floats(), elems_[t], stream));
    }
    return Status::Ok();
  }

 private:
  std::vector<worker::cuda::DeviceBuffer> params_, deltas_;
  std::vector<int64_t> elems_;
};

struct Config {
  int steps = 30;
  int warmup = 5;
  int shards = 1;
};

// Synthetic examples: inputs in [0, 1), labels uniform; a few batches' worth.
Dataset Synthetic(const MlpShape& shape, int n) {
  Dataset d;
  d.n = n;
  d.dims = shape.inputs();
  d.num_classes = shape.classes();
  uint64_t s = 88172645463325252ull;
  auto next = [&s] {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return s;
  };
  d.x.resize(static_cast<size_t>(n) * d.dims);
  for (float& v : d.x) v = static_cast<float>(next() >> 40) / static_cast<float>(1 << 24);
  d.y.resize(n);
  for (int32_t& v : d.y) v = static_cast<int32_t>(next() % d.num_classes);
  return d;
}

Batch Slice(const Dataset& d, int i, int batch) {
  const int k = i % static_cast<int>(d.n / batch);
  return Batch{d.x.data() + static_cast<size_t>(k) * batch * d.dims, d.y.data() + k * batch, batch};
}

constexpr float kLr = 0.01f;

// Mean ms per step of the standalone loop.
Result<double> Standalone(const Config& cfg, const MlpShape& shape, const ModelSpec& spec,
                          const Dataset& data, int batch) {
  ResidentTables tables;  // outlives the backend, whose destructor drains the stream
  GEOPS_ASSIGN_OR_RETURN(auto backend, worker::cuda::CudaBackend::Create(shape));
  GEOPS_RETURN_IF_ERROR(tables.Init(worker::InitialTables(spec)));
  double start = 0;
  for (int i = 0; i < cfg.warmup + cfg.steps; ++i) {
    if (i == cfg.warmup) start = NowSeconds();
    GEOPS_RETURN_IF_ERROR(backend->EnqueueTrainStep(&tables, Slice(data, i, batch), kLr));
    GEOPS_ASSIGN_OR_RETURN(worker::StepStats st, backend->FinishTrainStep());
    (void)st;
    GEOPS_RETURN_IF_ERROR(tables.Apply(backend->compute_stream()));
  }
  GEOPS_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(backend->compute_stream()));
  return (NowSeconds() - start) * 1e3 / cfg.steps;
}

// Mean ms per step through geops: Refresh, GPU step, Clock.
Result<double> ThroughGeops(const Config& cfg, const MlpShape& shape, const ModelSpec& spec,
                            const Dataset& data, int batch, int64_t staleness) {
  std::vector<std::unique_ptr<datacenter::Shard>> shards;
  std::vector<datacenter::Shard*> raw;
  for (int s = 0; s < cfg.shards; ++s) {
    ShardOptions o;
    o.shard_id = s;
    o.num_shards = cfg.shards;
    o.num_workers = 1;
    GEOPS_ASSIGN_OR_RETURN(auto shard, datacenter::Shard::Create(spec, o));
    raw.push_back(shard.get());
    shards.push_back(std::move(shard));
  }
  InProcessFactory factory(raw);
  WorkerClientOptions wo;
  wo.staleness = staleness;
  GEOPS_ASSIGN_OR_RETURN(auto client, worker::PsClient::Create(spec, cfg.shards, wo, &factory));
  GEOPS_RETURN_IF_ERROR(client->Start());
  GEOPS_ASSIGN_OR_RETURN(auto backend, worker::cuda::CudaBackend::Create(shape));
  GEOPS_ASSIGN_OR_RETURN(auto path,
                         worker::cuda::CudaTrainerPath::ForBackend(backend.get(), client.get()));
  const int total = cfg.warmup + cfg.steps;
  double start = 0;
  for (int i = 0; i < total; ++i) {
    if (i == cfg.warmup) start = NowSeconds();
    GEOPS_RETURN_IF_ERROR(client->Refresh());
    GEOPS_ASSIGN_OR_RETURN(worker::StepStats st, path->TrainStep(Slice(data, i, batch), kLr));
    (void)st;
    GEOPS_RETURN_IF_ERROR(client->Clock(i + 1 == total));
  }
  return (NowSeconds() - start) * 1e3 / cfg.steps;
}

int Run(const Config& cfg) {
  const Status device = worker::cuda::CudaDeviceStatus();
  if (!device.ok()) {
    std::printf("%s\n", device.message().c_str());
    return 0;
  }
  auto name = worker::cuda::CudaDeviceName(0);
  std::printf("gpu_step on %s; %d steps after %d warm-up, %d shard(s), in-process\n",
              name.ok() ? name->c_str() : "?", cfg.steps, cfg.warmup, cfg.shards);
  std::printf("%-18s %6s %12s %12s %7s %12s %7s\n", "mlp", "batch", "standalone", "geops s=0", "%",
              "geops s=3", "%");
  const std::vector<std::string> shapes = {"784-512-256-10", "784-4096-4096-10"};
  for (const std::string& text : shapes) {
    auto shape = worker::ParseMlpShape(text);
    auto spec = worker::MlpModelSpec(*shape);
    if (!shape.ok() || !spec.ok()) return 1;
    for (int batch : {64, 128, 256, 512, 1024}) {
      const Dataset data = Synthetic(*shape, 4 * batch);
      auto alone = Standalone(cfg, *shape, *spec, data, batch);
      auto bsp = ThroughGeops(cfg, *shape, *spec, data, batch, 0);
      auto ssp = ThroughGeops(cfg, *shape, *spec, data, batch, 3);
      for (const Status& st : {alone.status(), bsp.status(), ssp.status()}) {
        if (!st.ok()) {
          std::fprintf(stderr, "%s batch %d: %s\n", text.c_str(), batch, st.ToString().c_str());
          return 1;
        }
      }
      std::printf("%-18s %6d %12.3f %12.3f %6.1f%% %12.3f %6.1f%%\n", text.c_str(), batch, *alone,
                  *bsp, 100.0 * *alone / *bsp, *ssp, 100.0 * *alone / *ssp);
      std::fflush(stdout);
    }
  }
  return 0;
}

}  // namespace
}  // namespace geops::bench

int main(int argc, char** argv) {
  geops::bench::Config cfg;
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    if (std::strncmp(a, "--steps=", 8) == 0) {
      cfg.steps = std::atoi(a + 8);
    } else if (std::strncmp(a, "--warmup=", 9) == 0) {
      cfg.warmup = std::atoi(a + 9);
    } else if (std::strncmp(a, "--shards=", 9) == 0) {
      cfg.shards = std::atoi(a + 9);
    } else {
      std::fprintf(stderr, "usage: gpu_step [--steps=N] [--warmup=N] [--shards=N]\n");
      return 2;
    }
  }
  if (cfg.steps < 1 || cfg.warmup < 0 || cfg.shards < 1) {
    std::fprintf(stderr, "gpu_step: --steps and --shards must be >= 1, --warmup >= 0\n");
    return 2;
  }
  return geops::bench::Run(cfg);
}
