#include "supervisor/launch/prometheus_targets.h"

#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

namespace geops::supervisor {

std::string PrometheusTargets::Render() const {
  nlohmann::json groups = nlohmann::json::array();
  for (const auto& [key, address] : targets_) {
    groups.push_back({{"targets", {address}}, {"labels", {{"job", "geops"}, {"site", key.first}, {"process", key.second}}}});
  }
  return groups.dump(2) + "\n";
}

Status PrometheusTargets::Set(const std::string& site, const std::string& process, const std::string& address) {
  targets_[{site, process}] = address;
  const std::string tmp = path_ + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << Render();
    if (!out.good()) return UnavailableError("cannot write " + tmp);
  }
  if (std::rename(tmp.c_str(), path_.c_str()) != 0) return UnavailableError("cannot rename " + tmp + " to " + path_);
  return Status::Ok();
}

}  // namespace geops::supervisor
