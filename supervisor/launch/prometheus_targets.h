// PrometheusTargets: the Prometheus file-based service discovery file of a
// run (`prometheus_targets.json` in the launch folder): one target group
// per process that serves /metrics, labelled with its site and process
// ("shard-0", "worker-1"). geops launch rewrites it whenever a process
// says where its endpoint is (its "metrics" event; a restarted process
// replaces its entry), through a temporary file and a rename, so a
// Prometheus server watching it never reads half a file. Point a
// `file_sd_configs` entry at it (docs/operations.md).
//
// Thread-compatible.
#ifndef GEOPS_SUPERVISOR_LAUNCH_PROMETHEUS_TARGETS_H_
#define GEOPS_SUPERVISOR_LAUNCH_PROMETHEUS_TARGETS_H_

#include <map>
#include <string>
#include <utility>

#include "common/status.h"

namespace geops::supervisor {

class PrometheusTargets {
 public:
  explicit PrometheusTargets(std::string path) : path_(std::move(path)) {}

  // Records (or replaces) the endpoint of `process` of `site` and rewrites
  // the file.
  Status Set(const std::string& site, const std::string& process, const std::string& address);
  // The same for shard or worker `index` ("shard-0", "worker-1").
  Status Set(const std::string& site, bool shard, int index, const std::string& address) {
    return Set(site, (shard ? "shard-" : "worker-") + std::to_string(index), address);
  }
  // The file's JSON text.
  std::string Render() const;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::map<std::pair<std::string, std::string>, std::string> targets_;  // (site, process) -> host:port
};

}  // namespace geops::supervisor

#endif  // GEOPS_SUPERVISOR_LAUNCH_PROMETHEUS_TARGETS_H_
