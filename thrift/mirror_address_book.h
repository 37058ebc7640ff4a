// MirrorAddressBook: where a site process learns its peers' mirror
// addresses (possibly after it started serving), and the incarnation of its
// own store that its heartbeats carry. Until a peer's address is known,
// every call towards it answers Unavailable, which the sender retries
// (thrift/mirror_channel.h). Free of Thrift types.
//
// Thread-safety: may be used from any thread.
#ifndef GEOPS_THRIFT_MIRROR_ADDRESS_BOOK_H_
#define GEOPS_THRIFT_MIRROR_ADDRESS_BOOK_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>

#include "common/ids.h"
#include "thrift/host_port.h"

namespace geops::rpc {

class MirrorAddressBook {
 public:
  void Set(SiteId site, HostPort address);
  std::optional<HostPort> Find(SiteId site) const;
  size_t size() const;
  // This shard's store incarnation, which heartbeats carry (0 until set).
  void SetIncarnation(uint64_t incarnation) { incarnation_.store(incarnation, std::memory_order_relaxed); }
  uint64_t incarnation() const { return incarnation_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> incarnation_{0};
  mutable std::mutex mu_;
  std::map<SiteId, HostPort> addresses_;  // GUARDED_BY(mu_)
};

}  // namespace geops::rpc

#endif  // GEOPS_THRIFT_MIRROR_ADDRESS_BOOK_H_
