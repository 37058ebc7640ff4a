// RegistrationHold: whether a shard takes worker registrations now. The
// WAN layer holds them while a site with a new store asks its peers what
// they hold of it (wan/replication/replicator_rejoin.cc), and releases them
// with the outcome: OK lets workers in, an error keeps them out for good,
// naming it. Workers that registered before are not affected.
//
// Thread-safety: all methods may be called concurrently (one leaf mutex).
#ifndef GEOPS_DATACENTER_REGISTRATION_HOLD_H_
#define GEOPS_DATACENTER_REGISTRATION_HOLD_H_

#include <mutex>
#include <string>

#include "common/ids.h"
#include "common/status.h"

namespace geops::datacenter {

class RegistrationHold {
 public:
  // Registrations are answered Unavailable(why) until Release.
  void Hold(const std::string& why);
  // Ends the hold; an error refuses every later registration.
  void Release(const Status& outcome);
  // OK when a registration may go on at shard `shard`; Unavailable while
  // held (the worker retries); FailedPrecondition naming the outcome of a
  // failed release.
  Status Check(ShardId shard) const;

 private:
  mutable std::mutex mu_;
  std::string why_;  // GUARDED_BY(mu_): non-empty while held
  Status outcome_;   // GUARDED_BY(mu_)
};

}  // namespace geops::datacenter

#endif  // GEOPS_DATACENTER_REGISTRATION_HOLD_H_
