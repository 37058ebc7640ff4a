// `geops deploy k8s TOPOLOGY --certs DIR --out DIR`: renders the Kubernetes
// manifests of a deployment (cli/deploy_k8s.h) into OUT/geops.yaml.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "cli/commands.h"
#include "cli/deploy_k8s.h"

namespace geops::cli {

int RunDeployK8s(const DeployArgs& args) {
  // The pods bind beyond loopback with the certificates given here, so the
  // topology is read with the TLS rule lifted (the manifests set it).
  auto topology = config::LoadTopology(args.topology_path, /*require_tls=*/false);
  if (!topology.ok()) {
    std::fprintf(stderr, "geops deploy: %s\n", topology.status().ToString().c_str());
    return 2;
  }
  K8sOptions o;
  o.image = args.image;
  o.namespace_name = args.namespace_name;
  o.certs_dir = args.certs_dir;
  o.storage_size = args.storage_size;
  o.repo_root = args.repo_root;
  o.emulate_links = args.emulate_links;
  std::ifstream in(args.topology_path);
  std::ostringstream text;
  text << in.rdbuf();
  o.topology_text = text.str();
  auto objects = RenderK8s(*topology, o);
  if (!objects.ok()) {
    std::fprintf(stderr, "geops deploy: %s\n", objects.status().ToString().c_str());
    return objects.status().code() == StatusCode::kInvalidArgument ? 2 : 1;
  }
  std::error_code ec;
  std::filesystem::create_directories(args.out_dir, ec);
  const std::string path = args.out_dir + "/geops.yaml";
  std::ofstream out(path, std::ios::trunc);
  for (const auto& obj : *objects) out << "---\n" << obj.dump(2) << "\n";
  if (!out.good()) {
    std::fprintf(stderr, "geops deploy: cannot write %s\n", path.c_str());
    return 1;
  }
  std::printf("wrote %s: %zu objects for %zu sites (namespace %s, image %s); kubectl apply -f %s\n", path.c_str(),
              objects->size(), topology->sites.size(), o.namespace_name.c_str(), o.image.c_str(), path.c_str());
  return 0;
}

}  // namespace geops::cli
