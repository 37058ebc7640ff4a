// MirrorIdentity: who one end of a WAN mirror connection is: its site, its
// shard index and the model it serves. A value type; thread-compatible.
#ifndef GEOPS_THRIFT_MIRROR_IDENTITY_H_
#define GEOPS_THRIFT_MIRROR_IDENTITY_H_

#include <cstdint>

#include "common/ids.h"

namespace geops::rpc {

struct MirrorIdentity {
  SiteId site = 0;
  ShardId shard = 0;
  uint64_t model_fingerprint = 0;  // 0: not checked
};

}  // namespace geops::rpc

#endif  // GEOPS_THRIFT_MIRROR_IDENTITY_H_
