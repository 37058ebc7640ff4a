// ThriftShardConnectionFactory: opens a worker::ShardConnection over Thrift
// to each shard of a site, by shard id (the connections: thrift/ps_client.h).
// The header code outside thrift/ includes: it exposes geops types only.
//
// Thread-safety: immutable once created; Connect may be called from any
// thread.
#ifndef GEOPS_THRIFT_SHARD_CONNECTION_FACTORY_H_
#define GEOPS_THRIFT_SHARD_CONNECTION_FACTORY_H_

#include <memory>
#include <string>
#include <vector>

#include "common/ids.h"
#include "common/model_spec.h"
#include "common/status.h"
#include "thrift/host_port.h"
#include "thrift/thrift_options.h"
#include "worker/shard_connection.h"

namespace geops::rpc {

class ThriftShardConnectionFactory : public worker::ShardConnectionFactory {
 public:
  // `shards[i]` is the address of shard i ("host:port"). InvalidArgument
  // naming the shard when the list is empty, an address does not parse or
  // has port 0, or options do not validate. `spec`: see
  // ThriftShardConnection::Create.
  static Result<std::unique_ptr<ThriftShardConnectionFactory>> Create(
      const std::vector<std::string>& shards, const ThriftClientOptions& options,
      std::shared_ptr<const ModelSpec> spec = nullptr);
  static Result<std::unique_ptr<ThriftShardConnectionFactory>> Create(
      std::vector<HostPort> shards, const ThriftClientOptions& options,
      std::shared_ptr<const ModelSpec> spec = nullptr);

  // A new, not yet connected connection to `shard`; InvalidArgument when the
  // id is outside [0, num_shards()). No I/O.
  Result<std::unique_ptr<worker::ShardConnection>> Connect(ShardId shard) override;

  int num_shards() const { return static_cast<int>(shards_.size()); }

 private:
  ThriftShardConnectionFactory(std::vector<HostPort> shards, const ThriftClientOptions& options,
                               std::shared_ptr<const ModelSpec> spec)
      : shards_(std::move(shards)), options_(options), spec_(std::move(spec)) {}

  const std::vector<HostPort> shards_;
  const ThriftClientOptions options_;
  const std::shared_ptr<const ModelSpec> spec_;
};

}  // namespace geops::rpc

#endif  // GEOPS_THRIFT_SHARD_CONNECTION_FACTORY_H_
