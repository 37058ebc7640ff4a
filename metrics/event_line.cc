#include "metrics/event_line.h"

#include <cstdio>
#include <mutex>
#include <string>

namespace geops::metrics {

void EmitEvent(const nlohmann::json& event) {
  static std::mutex mu;
  const std::string line = std::string(kEventPrefix) + event.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  std::lock_guard<std::mutex> lock(mu);
  std::fwrite(line.data(), 1, line.size(), stdout);
  std::fflush(stdout);
}

}  // namespace geops::metrics
