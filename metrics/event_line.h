// Event lines: how geops child processes report to `geops launch`.
//
// A child prints one line per event on stdout: the prefix "@geops " and one
// JSON object with an "event" field ("listening", "progress", "eval",
// "final", "shard_stats"). Every other line is plain log output.
//
// Thread-safety: EmitEvent serialises writers with a mutex.
#ifndef GEOPS_METRICS_EVENT_LINE_H_
#define GEOPS_METRICS_EVENT_LINE_H_

#include <string_view>

#include <nlohmann/json.hpp>

namespace geops::metrics {

inline constexpr std::string_view kEventPrefix = "@geops ";

// Prints `event` as one event line on stdout and flushes.
void EmitEvent(const nlohmann::json& event);

}  // namespace geops::metrics

#endif  // GEOPS_METRICS_EVENT_LINE_H_
