// The environment `geops launch` gives a worker that runs the topology's
// `[training] command` (the user's own training script), as torchrun gives
// RANK and WORLD_SIZE. The geops Python package reads these
// (python/geops/config.py); a script in any language can too.
//
//   GEOPS_SITE, GEOPS_WORKER      site name, worker index within the site
//   GEOPS_SITE_INDEX, GEOPS_NUM_SITES, GEOPS_WORKERS (of this site)
//   GEOPS_RANK, GEOPS_WORLD_SIZE  index over every worker of every site
//                                 (sites in topology order), their count
//   GEOPS_SHARDS                  host:port of each shard of the site, in order
//   GEOPS_TOPOLOGY                the topology file (absolute path)
//   GEOPS_CLOCKS                  the clock budget ([training] clocks)
//   GEOPS_OUT                     the launch's results folder
//   GEOPS_EXIT_WITH_PARENT=1      end when the launcher dies
//   GEOPS_TAKEOVER=1              (a restart only) the previous process of this
//                                 worker is gone: take its worker id at once
//   PYTHONPATH                    the geops package's folder first, when found
//
// Everything else is the launcher's own environment.
#ifndef GEOPS_SUPERVISOR_LAUNCH_WORKER_ENV_H_
#define GEOPS_SUPERVISOR_LAUNCH_WORKER_ENV_H_

#include <string>
#include <vector>

#include "config/topology.h"

namespace geops::supervisor {

struct WorkerEnvArgs {
  int site = 0;
  int worker = 0;
  std::string shards;          // "host:port,..."
  std::string topology_path;   // absolute
  std::string out_dir;
  std::string python_path;     // folder holding the geops package; "" = leave PYTHONPATH alone
};

// "NAME=value" entries: `base` (e.g. environ) with the variables above set.
std::vector<std::string> CommandWorkerEnv(const config::Topology& t, const WorkerEnvArgs& args, char** base);

// How `geops launch` starts worker `args.worker` of site `args.site`: the
// topology's [training] command, in the topology file's folder, with the
// variables above; or, without one, `geops_binary worker ...` in the
// launcher's folder and environment (env and cwd empty).
struct WorkerCommand {
  std::vector<std::string> argv;
  std::vector<std::string> env;
  std::string cwd;
};
WorkerCommand BuildWorkerCommand(const config::Topology& t, const WorkerEnvArgs& args, const std::string& geops_binary,
                                 char** base);

// The folder that holds the geops Python package built or installed next to
// `geops_binary` (build tree: <build>/python; installed: <prefix>/lib/geops/python),
// or "" when there is none.
std::string FindPythonPackage(const std::string& geops_binary);

}  // namespace geops::supervisor

#endif  // GEOPS_SUPERVISOR_LAUNCH_WORKER_ENV_H_
