#include "datacenter/registration_hold.h"

namespace geops::datacenter {

void RegistrationHold::Hold(const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  why_ = why.empty() ? std::string("registrations are held") : why;
}

void RegistrationHold::Release(const Status& outcome) {
  std::lock_guard<std::mutex> lock(mu_);
  why_.clear();
  outcome_ = outcome;
}

Status RegistrationHold::Check(ShardId shard) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!outcome_.ok()) {
    return FailedPreconditionError("shard " + std::to_string(shard) + " cannot take workers: " + outcome_.message());
  }
  if (!why_.empty()) return UnavailableError("shard " + std::to_string(shard) + ": " + why_);
  return Status::Ok();
}

}  // namespace geops::datacenter
