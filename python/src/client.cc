#include "python/src/client.h"

#include <cmath>
#include <cstring>
#include <string>

#include "datacenter/float_kernels.h"
#include "thrift/ps_client.h"

namespace geops::python {
namespace {

std::string Describe(float v) {
  if (std::isnan(v)) return "nan";
  return v > 0 ? "inf" : "-inf";
}

}  // namespace

Result<std::unique_ptr<Client>> Client::Create(ClientConfig config) {
  GEOPS_RETURN_IF_ERROR(config.options.Validate());
  GEOPS_ASSIGN_OR_RETURN(ModelSpec spec, ClientModelSpec(config.tables, config.chunk_bytes,
                                                         config.site_model ? &*config.site_model : nullptr));
  std::unique_ptr<Client> c(new Client());
  c->config_ = std::move(config);
  c->spec_ = std::move(spec);
  return c;
}

Client::~Client() { client_.reset(); }

Status Client::CheckViews(std::span<const TableView> views) const {
  const ModelSpec& s = spec();
  if (views.size() != static_cast<size_t>(s.num_tables())) {
    return InvalidArgumentError("got " + std::to_string(views.size()) + " tensors for a model of " +
                                std::to_string(s.num_tables()) + " tables");
  }
  for (TableId t = 0; t < static_cast<TableId>(views.size()); ++t) {
    const TableSpec& table = s.table(t);
    if (views[t].size != table.rows * table.cols) {
      return InvalidArgumentError("parameter '" + table.name + "' has " + std::to_string(views[t].size) +
                                  " elements; its table is " + std::to_string(table.rows) + "x" +
                                  std::to_string(table.cols));
    }
  }
  return Status::Ok();
}

Status Client::CheckStarted() const {
  if (client_ == nullptr) return FailedPreconditionError("the geops client has not started");
  return Status::Ok();
}

Status Client::Start(std::span<const TableView> initial) {
  if (client_ != nullptr) return FailedPreconditionError("the geops client has started already");
  GEOPS_RETURN_IF_ERROR(CheckViews(initial));
  staged_ = false;
  std::vector<const float*> values;
  if (spec_.client_defined()) {
    // The schema's checksums come from the values the model was built with.
    std::vector<TableSpec> tables = spec_.tables();
    for (size_t t = 0; t < tables.size(); ++t) {
      tables[t].init_checksum = ValuesChecksum(std::span<const float>(initial[t].data, initial[t].size));
      values.push_back(initial[t].data);
    }
    GEOPS_ASSIGN_OR_RETURN(spec_, ModelSpec::Create(std::move(tables), spec_.chunk_bytes(), 0));
  }
  rpc::ThriftClientOptions thrift_options;
  thrift_options.rpc_timeout_ms = config_.options.rpc_timeout_ms;
  // With the spec, pulled chunks land straight in the cache and their sizes are checked.
  GEOPS_ASSIGN_OR_RETURN(thrift_, rpc::ThriftShardConnectionFactory::Create(
                                      config_.shards, thrift_options, std::make_shared<const ModelSpec>(spec_)));
  factory_ = std::make_unique<CancellableConnectionFactory>(thrift_.get(), &cancel_);
  GEOPS_ASSIGN_OR_RETURN(std::unique_ptr<worker::PsClient> client,
                         worker::PsClient::Create(spec_, static_cast<int>(config_.shards.size()), config_.options,
                                                  factory_.get()));
  GEOPS_RETURN_IF_ERROR(client->Start(values));
  client_ = std::move(client);
  return Status::Ok();
}

Status Client::Pull(int64_t staleness) {
  GEOPS_RETURN_IF_ERROR(CheckStarted());
  if (staged_) {
    return FailedPreconditionError("pull() after push() in clock " + std::to_string(clock()) +
                                   ": call clock() first (a pull would overwrite the values the pushed "
                                   "delta was taken from)");
  }
  if (staleness == kConfiguredStaleness) return client_->Refresh();
  return client_->ReadAt(client_->clock(), staleness);
}

Status Client::CopyOut(std::span<const TableView> views) const {
  GEOPS_RETURN_IF_ERROR(CheckStarted());
  GEOPS_RETURN_IF_ERROR(CheckViews(views));
  for (TableId t = 0; t < static_cast<TableId>(views.size()); ++t) {
    std::memcpy(views[t].data, client_->table(t), views[t].size * sizeof(float));
  }
  return Status::Ok();
}

Status Client::StagePush(std::span<const TableView> views) {
  GEOPS_RETURN_IF_ERROR(CheckStarted());
  GEOPS_RETURN_IF_ERROR(CheckViews(views));
  const ModelSpec& s = spec();
  // Check everything before staging anything: a refused push leaves the op-log as it was.
  for (TableId t = 0; t < static_cast<TableId>(views.size()); ++t) {
    const int64_t bad = datacenter::FirstNonFinite(views[t].data, views[t].size);
    if (bad < 0) continue;
    const int64_t cols = s.table(t).cols;
    return InvalidArgumentError("push refused, nothing sent: parameter '" + s.table(t).name + "' holds " +
                                Describe(views[t].data[bad]) + " at element " + std::to_string(bad) + " (row " +
                                std::to_string(bad / cols) + ", col " + std::to_string(bad % cols) +
                                "); check the loss and gradients of this step");
  }
  for (TableId t = 0; t < static_cast<TableId>(views.size()); ++t) {
    const float* now = views[t].data;
    const float* pulled = client_->table(t);
    float* delta = client_->delta(t);
    bool changed = false;
    for (int64_t i = 0; i < views[t].size; ++i) {
      delta[i] = now[i] - pulled[i];
      changed |= delta[i] != 0.0f;
    }
    if (changed) client_->MarkDirty(t);
  }
  staged_ = true;
  return Status::Ok();
}

Status Client::Clock(bool finished) {
  GEOPS_RETURN_IF_ERROR(CheckStarted());
  GEOPS_RETURN_IF_ERROR(client_->Clock(finished));
  staged_ = false;
  return Status::Ok();
}

}  // namespace geops::python
