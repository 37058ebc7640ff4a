// `geops trace show TOPOLOGY`: prints the effective WAN link table of a
// topology (config/wan_links.h), as the site processes will use it.
#include <cstdio>

#include "cli/commands.h"
#include "config/model_from_topology.h"
#include "config/wan_links.h"

namespace geops::cli {

int RunTraceShow(const TraceShowArgs& args) {
  Result<config::Topology> topology = config::LoadTopology(args.topology_path);
  if (!topology.ok()) {
    std::fprintf(stderr, "geops trace show: %s\n", topology.status().message().c_str());
    return 2;
  }
  if (!topology->multi_site()) {
    std::printf("%s has one site: no WAN links\n", topology->name.c_str());
    return 0;
  }
  Result<std::vector<config::EffectiveLink>> links = config::BuildLinks(*topology);
  if (!links.ok()) {
    std::fprintf(stderr, "geops trace show: %s\n", links.status().message().c_str());
    return 2;
  }
  // A model the workers bring (workload "client") has no size until they
  // register: no copy time then, rather than the built-in MLP's.
  Result<ModelSpec> model = topology->client_model() ? Result<ModelSpec>(NotFoundError("client model"))
                                                     : config::BuildModelSpec(*topology);
  const int64_t model_bytes = model.ok() ? model->total_elements() * 4 : 0;
  std::printf("%s", config::FormatLinkTable(*topology, *links, model_bytes).c_str());
  return 0;
}

}  // namespace geops::cli
