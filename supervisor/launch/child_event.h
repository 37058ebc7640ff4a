// Child event lines: how `geops site` and `geops worker` report to the
// launcher. A line on a child's stdout that starts with "@geops " carries one
// JSON object with an "event" string field ("listening", "progress", "eval",
// "final", "shard_stats", ...); every other line is plain log output.
// Unknown events are legal (newer children, older launcher); a line with the
// prefix but no valid JSON object is reported as malformed, never fatal.
//
// Free functions on values; thread-safe.
#ifndef GEOPS_SUPERVISOR_LAUNCH_CHILD_EVENT_H_
#define GEOPS_SUPERVISOR_LAUNCH_CHILD_EVENT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "metrics/event_line.h"  // kEventPrefix

namespace geops::supervisor {

enum class ChildLineKind { kPlain, kEvent, kMalformed };

struct ChildLine {
  ChildLineKind kind = ChildLineKind::kPlain;
  nlohmann::json event;  // kEvent: an object with a string "event" field
  std::string name;      // kEvent: the value of "event"
  std::string error;     // kMalformed: why
};

// Classifies and parses one output line (without its newline). Never throws.
ChildLine ParseChildLine(std::string_view line);

// Typed reads of an event's fields. Absent, null or wrongly typed -> nullopt.
std::optional<double> NumberField(const nlohmann::json& event, const char* key);
std::optional<int64_t> IntField(const nlohmann::json& event, const char* key);
std::optional<std::string> StringField(const nlohmann::json& event, const char* key);
// The port of a "host:port" address a child announced (its `listening`
// event), or -1.
int PortOf(const std::string& address);

// One line of JSON; invalid UTF-8 is replaced rather than thrown on.
std::string DumpJsonLine(const nlohmann::json& value);

}  // namespace geops::supervisor

#endif  // GEOPS_SUPERVISOR_LAUNCH_CHILD_EVENT_H_
