#include "supervisor/launch/child_event.h"

#include <cmath>

namespace geops::supervisor {

ChildLine ParseChildLine(std::string_view line) {
  ChildLine out;
  if (line.substr(0, metrics::kEventPrefix.size()) != metrics::kEventPrefix) return out;
  std::string_view body = line.substr(metrics::kEventPrefix.size());
  nlohmann::json j = nlohmann::json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    out.kind = ChildLineKind::kMalformed;
    out.error = "not valid JSON";
    return out;
  }
  if (!j.is_object()) {
    out.kind = ChildLineKind::kMalformed;
    out.error = "not a JSON object";
    return out;
  }
  auto it = j.find("event");
  if (it == j.end() || !it->is_string()) {
    out.kind = ChildLineKind::kMalformed;
    out.error = "no \"event\" string field";
    return out;
  }
  out.kind = ChildLineKind::kEvent;
  out.name = it->get<std::string>();
  out.event = std::move(j);
  return out;
}

std::optional<double> NumberField(const nlohmann::json& event, const char* key) {
  if (!event.is_object()) return std::nullopt;
  auto it = event.find(key);
  if (it == event.end() || !it->is_number()) return std::nullopt;
  double v = it->get<double>();
  if (!std::isfinite(v)) return std::nullopt;
  return v;
}

std::optional<int64_t> IntField(const nlohmann::json& event, const char* key) {
  if (!event.is_object()) return std::nullopt;
  auto it = event.find(key);
  if (it == event.end()) return std::nullopt;
  if (it->is_number_integer()) return it->get<int64_t>();
  if (it->is_number_float()) {
    double v = it->get<double>();
    if (std::isfinite(v) && std::abs(v) < 9e18) return static_cast<int64_t>(v);
  }
  return std::nullopt;
}

std::optional<std::string> StringField(const nlohmann::json& event, const char* key) {
  if (!event.is_object()) return std::nullopt;
  auto it = event.find(key);
  if (it == event.end() || !it->is_string()) return std::nullopt;
  return it->get<std::string>();
}

int PortOf(const std::string& address) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) return -1;
  try {
    return std::stoi(address.substr(colon + 1));
  } catch (...) {
    return -1;
  }
}

std::string DumpJsonLine(const nlohmann::json& value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace geops::supervisor
