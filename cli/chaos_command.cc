// `geops chaos TOPOLOGY --out DIR`: the arguments of a chaos run (supervisor/chaos/chaos.h).
#include <cstdio>
#include <sstream>

#include "cli/commands.h"
#include "cli/launch_command.h"
#include "supervisor/chaos/chaos.h"

namespace geops::cli {

int RunChaosCommand(const ChaosArgs& args) {
  auto bad = [](const std::string& m) {
    std::fprintf(stderr, "geops chaos: %s\n", m.c_str());
    return 2;
  };
  Result<config::Topology> topology = config::LoadTopology(args.topology_path);
  if (!topology.ok()) return bad(topology.status().message());
  Result<std::string> binary = ResolveGeopsBinary("");
  if (!binary.ok()) return bad(binary.status().message());
  if (Status made = MakeResultsFolder(args.out_dir); !made.ok()) return bad(made.message());
  RaiseOpenFileLimit();
  supervisor::ChaosOptions o;
  o.topology = std::move(topology).value();
  o.topology_path = AbsolutePath(args.topology_path);
  o.out_dir = AbsolutePath(args.out_dir);
  o.geops_binary = *binary;
  o.seed = args.seed;
  o.kills = args.kills;
  o.drain_kills = args.drain_kills;
  o.restart_min_ms = args.restart_min_ms;
  o.restart_max_ms = args.restart_max_ms;
  o.stall_bound_s = args.stall_bound_s;
  o.timeout_s = args.timeout_s;
  o.kinds.clear();
  std::stringstream kinds(args.kinds);
  for (std::string k; std::getline(kinds, k, ',');) o.kinds.push_back(k);
  return supervisor::RunChaos(o);
}

}  // namespace geops::cli
