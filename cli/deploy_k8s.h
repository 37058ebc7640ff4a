// `geops deploy k8s TOPOLOGY --certs DIR --out DIR`: the Kubernetes
// manifests of a deployment, one region per site.
//
// Per site:
//   - a StatefulSet `<site>-shard` of `shards` pods, pod k running shard k
//     (`geops site ... --shard <ordinal>`), each with a PersistentVolumeClaim
//     for its RocksDB store (`--data-dir /var/lib/geops/store`);
//   - an Indexed Job `<site>-worker` of `workers` pods, pod i running worker
//     i (`geops worker ... --worker $JOB_COMPLETION_INDEX`), restarted on
//     failure;
//   - a headless Service `<site>-shard` for the LAN (7000), mirror (8000)
//     and metrics (9100) ports: shard k of site s is
//     `<s>-shard-<k>.<s>-shard`, which the workers and the other sites'
//     same shard dial;
//   - a Secret `<site>-certs` with the CA certificate and the site's and its
//     workers' certificates and keys from `geops certs`;
//   - placement by the standard `topology.kubernetes.io/region` node label
//     (the site's `region` without its cloud prefix), TCP readiness and
//     liveness probes on the LAN port (shards) and HTTP on /metrics
//     (workers), and Prometheus scrape annotations.
// One ConfigMap `geops-topology` holds the topology as the pods read it:
// every site binds 0.0.0.0 on the fixed ports above, certificates under
// /etc/geops/certs, trace paths inside the image (/opt/geops, the
// repository built by deploy/Dockerfile), and `[wan] emulate = false`
// unless the options keep the replay (K8sOptions::emulate_links).
//
// The pods run the command lines of experiments/run_netns.sh (fixed
// ports, explicit shard and mirror addresses, mutual TLS), nothing else.
// Output: DIR/geops.yaml, JSON documents separated by `---` (JSON is YAML;
// `kubectl apply -f` takes it).
#ifndef GEOPS_CLI_DEPLOY_K8S_H_
#define GEOPS_CLI_DEPLOY_K8S_H_

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "config/topology.h"

namespace geops::cli {

struct K8sOptions {
  std::string image = "geops:latest";  // built from deploy/Dockerfile
  std::string namespace_name = "geops";
  std::string certs_dir;               // what `geops certs` wrote; required
  std::string storage_size = "20Gi";   // each shard's volume
  std::string topology_text;           // the topology file as written
  std::string repo_root = ".";         // trace paths under it map into /opt/geops
  // The pods' topology says `[wan] emulate = <this>`: false across real
  // regions (the network is the link; replaying the trace on top of it
  // would add its delay twice), true for a cluster rehearsing in one region.
  bool emulate_links = false;
};

inline constexpr int kK8sLanPort = 7000;
inline constexpr int kK8sMirrorPort = 8000;
inline constexpr int kK8sMetricsPort = 9100;

// The objects, in apply order. InvalidArgument naming the problem for a
// site name that is not a DNS label, a missing certificate file, or a trace
// path outside repo_root.
Result<std::vector<nlohmann::json>> RenderK8s(const config::Topology& topology, const K8sOptions& options);

// The topology text the pods read (ConfigMap `geops-topology`).
Result<std::string> K8sTopologyText(const config::Topology& topology, const K8sOptions& options);

}  // namespace geops::cli

#endif  // GEOPS_CLI_DEPLOY_K8S_H_
