// What `geops launch` adds for a topology with two or more sites: each shard
// process is told where the peers file will be, and once every shard has
// reported its mirror address (the "mirror" field of its "listening"
// event) the launcher writes that file, from which every shard learns the
// mirror addresses of the same shard in the other sites (site/site_wan.h).
//
// Free functions; thread-compatible.
#ifndef GEOPS_SUPERVISOR_LAUNCH_LAUNCH_WAN_H_
#define GEOPS_SUPERVISOR_LAUNCH_LAUNCH_WAN_H_

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "config/topology.h"

namespace geops::supervisor {

// OUT/wan/peers.json.
std::string PeersFilePath(const std::string& out_dir);

// Extra arguments of every `geops site` child: none for one site; else the
// peers file, and `run_id` (when not empty) so that a shard reads only the
// peers file of its own run (supervisor/launch/run_folder.h).
std::vector<std::string> WanSiteArguments(const config::Topology& topology, const std::string& out_dir,
                                          const std::string& run_id = "");

// Writes the peers file from the mirror address of each (site, shard), with
// the run's id, atomically. InvalidArgument naming a shard without one;
// Unavailable when the file cannot be written.
Status WritePeersFile(const config::Topology& topology, const std::string& out_dir, const std::string& run_id,
                      const std::map<std::pair<int, int>, std::string>& mirrors);

}  // namespace geops::supervisor

#endif  // GEOPS_SUPERVISOR_LAUNCH_LAUNCH_WAN_H_
