#include "cli/deploy_k8s.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <openssl/evp.h>

namespace geops::cli {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr const char* kTopologyPath = "/etc/geops/topology.toml";
constexpr const char* kCertsPath = "/etc/geops/certs";
constexpr const char* kImageRoot = "/opt/geops";
constexpr const char* kRegionLabel = "topology.kubernetes.io/region";

Result<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError("cannot read " + path + " (run `geops certs` for the topology first)");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool IsDnsLabel(const std::string& s) {
  if (s.empty() || s.size() > 40) return false;  // room for "-shard-NN" etc.
  for (char c : s) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
  }
  return s.front() != '-' && s.back() != '-';
}

// Secret data: standard base64 (OpenSSL's encoder, no line breaks).
std::string Base64(const std::string& in) {
  std::string out(4 * ((in.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(in.data()), static_cast<int>(in.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

std::string Trim(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t\r");
  if (a == std::string::npos) return "";
  return s.substr(a, s.find_last_not_of(" \t\r") - a + 1);
}

// The key of a `key = value` line, or "".
std::string KeyOf(const std::string& line) {
  const std::string t = Trim(line);
  if (t.empty() || t[0] == '#' || t[0] == '[') return "";
  const size_t eq = t.find('=');
  return eq == std::string::npos ? "" : Trim(t.substr(0, eq));
}

// The first quoted string of a line.
std::string QuotedValue(const std::string& line) {
  const size_t a = line.find('"');
  const size_t b = a == std::string::npos ? a : line.find('"', a + 1);
  return b == std::string::npos ? "" : line.substr(a + 1, b - a - 1);
}

// A path of the topology as the image sees it: under repo_root -> /opt/geops/...
Result<std::string> InImage(const config::Topology& t, const K8sOptions& o, const std::string& key, const std::string& value) {
  std::error_code host_ec, root_ec;
  const fs::path host = fs::weakly_canonical(fs::absolute(t.Resolve(value)), host_ec);
  const fs::path root = fs::weakly_canonical(fs::absolute(o.repo_root), root_ec);
  const fs::path rel = host.lexically_relative(root);
  if (host_ec || root_ec || rel.empty() || *rel.begin() == "..") {
    return InvalidArgumentError(t.path + ": wan." + key + " '" + value + "' is outside " + o.repo_root +
                                ", which the image holds at " + kImageRoot + "; copy it into the image's tree");
  }
  return std::string(kImageRoot) + "/" + rel.generic_string();
}

json Meta(const std::string& name, const K8sOptions& o, const std::string& site = "") {
  json m = {{"name", name}, {"namespace", o.namespace_name}, {"labels", {{"app.kubernetes.io/name", "geops"}}}};
  if (!site.empty()) m["labels"]["geops/site"] = site;
  return m;
}

json Affinity(const config::SiteSpec& s) {
  if (s.region.empty()) return nullptr;
  const size_t colon = s.region.find(':');
  const std::string region = colon == std::string::npos ? s.region : s.region.substr(colon + 1);
  return {{"nodeAffinity",
           {{"requiredDuringSchedulingIgnoredDuringExecution",
             {{"nodeSelectorTerms", json::array({{{"matchExpressions", json::array({{{"key", kRegionLabel},
                                                                                     {"operator", "In"},
                                                                                     {"values", {region}}}})}}})}}}}}};
}

json ScrapeAnnotations() {
  return {{"prometheus.io/scrape", "true"},
          {"prometheus.io/port", std::to_string(kK8sMetricsPort)},
          {"prometheus.io/path", "/metrics"}};
}

json Volumes(const config::SiteSpec& s) {
  return json::array({{{"name", "topology"}, {"configMap", {{"name", "geops-topology"}}}},
                      {{"name", "certs"}, {"secret", {{"secretName", s.name + "-certs"}, {"defaultMode", 0400}}}}});
}

json Mounts() {
  return json::array({{{"name", "topology"}, {"mountPath", kTopologyPath}, {"subPath", "topology.toml"}, {"readOnly", true}},
                      {{"name", "certs"}, {"mountPath", kCertsPath}, {"readOnly", true}}});
}

Result<json> SiteSecret(const config::Topology& t, int site, const K8sOptions& o) {
  const config::SiteSpec& s = t.sites[static_cast<size_t>(site)];
  json data = json::object();
  auto add = [&](const std::string& key, const std::string& rel) -> Status {
    GEOPS_ASSIGN_OR_RETURN(std::string bytes, ReadFile((fs::path(o.certs_dir) / rel).string()));
    data[key] = Base64(bytes);
    return Status::Ok();
  };
  GEOPS_RETURN_IF_ERROR(add("ca.pem", "ca.pem"));
  GEOPS_RETURN_IF_ERROR(add("site.pem", "sites/" + s.name + ".pem"));
  GEOPS_RETURN_IF_ERROR(add("site.key", "sites/" + s.name + ".key"));
  for (int w = 0; w < s.workers; ++w) {
    const std::string stem = "workers/" + s.name + "-worker-" + std::to_string(w);
    GEOPS_RETURN_IF_ERROR(add("worker-" + std::to_string(w) + ".pem", stem + ".pem"));
    GEOPS_RETURN_IF_ERROR(add("worker-" + std::to_string(w) + ".key", stem + ".key"));
  }
  return json{{"apiVersion", "v1"}, {"kind", "Secret"}, {"metadata", Meta(s.name + "-certs", o, s.name)},
              {"type", "Opaque"}, {"data", data}};
}

// The Secret's keys at the paths [security] certs expects.
json CertItems(const config::SiteSpec& s) {
  json items = json::array({{{"key", "ca.pem"}, {"path", "ca.pem"}},
                            {{"key", "site.pem"}, {"path", "sites/" + s.name + ".pem"}},
                            {{"key", "site.key"}, {"path", "sites/" + s.name + ".key"}}});
  for (int w = 0; w < s.workers; ++w) {
    const std::string i = std::to_string(w);
    items.push_back({{"key", "worker-" + i + ".pem"}, {"path", "workers/" + s.name + "-worker-" + i + ".pem"}});
    items.push_back({{"key", "worker-" + i + ".key"}, {"path", "workers/" + s.name + "-worker-" + i + ".key"}});
  }
  return items;
}

json ShardService(const config::SiteSpec& s, const K8sOptions& o) {
  return {{"apiVersion", "v1"},
          {"kind", "Service"},
          {"metadata", Meta(s.name + "-shard", o, s.name)},
          {"spec",
           {{"clusterIP", "None"},
            {"publishNotReadyAddresses", true},  // peers dial a shard that is still starting
            {"selector", {{"geops/site", s.name}, {"geops/role", "shard"}}},
            {"ports", json::array({{{"name", "lan"}, {"port", kK8sLanPort}},
                                   {{"name", "mirror"}, {"port", kK8sMirrorPort}},
                                   {{"name", "metrics"}, {"port", kK8sMetricsPort}}})}}}};
}

json ShardStatefulSet(const config::Topology& t, int site, const K8sOptions& o) {
  const config::SiteSpec& s = t.sites[static_cast<size_t>(site)];
  std::string peers;
  for (size_t p = 0; p < t.sites.size(); ++p) {
    if (static_cast<int>(p) == site) continue;
    const std::string& n = t.sites[p].name;
    peers += (peers.empty() ? "" : ",") + n + "=" + n + "-shard-$ORD." + n + "-shard:" + std::to_string(kK8sMirrorPort);
  }
  std::string cmd = "ORD=${HOSTNAME##*-}; exec geops site --topology " + std::string(kTopologyPath) + " --site " +
                    s.name + " --shard \"$ORD\" --port " + std::to_string(kK8sLanPort) + " --mirror-port " +
                    std::to_string(kK8sMirrorPort) + " --metrics-port " + std::to_string(kK8sMetricsPort) +
                    " --data-dir /var/lib/geops/store";
  if (!peers.empty()) cmd += " --mirror-peers \"" + peers + "\"";
  json volumes = Volumes(s);
  volumes[1]["secret"]["items"] = CertItems(s);
  json mounts = Mounts();
  mounts.push_back({{"name", "store"}, {"mountPath", "/var/lib/geops"}});
  json pod = {{"terminationGracePeriodSeconds", 60},  // a clean stop commits the store
              {"containers",
               json::array({{{"name", "shard"},
                             {"image", o.image},
                             {"command", {"/bin/sh", "-c", cmd}},
                             {"ports", json::array({{{"name", "lan"}, {"containerPort", kK8sLanPort}},
                                                    {{"name", "mirror"}, {"containerPort", kK8sMirrorPort}},
                                                    {{"name", "metrics"}, {"containerPort", kK8sMetricsPort}}})},
                             {"readinessProbe",
                              {{"tcpSocket", {{"port", kK8sLanPort}}}, {"periodSeconds", 5}, {"failureThreshold", 3}}},
                             {"livenessProbe",
                              {{"tcpSocket", {{"port", kK8sLanPort}}},
                               {"initialDelaySeconds", 30},  // a large store takes a while to load
                               {"periodSeconds", 10},
                               {"failureThreshold", 6}}},
                             {"volumeMounts", mounts}}})},
              {"volumes", volumes}};
  if (json a = Affinity(s); !a.is_null()) pod["affinity"] = a;
  return {{"apiVersion", "apps/v1"},
          {"kind", "StatefulSet"},
          {"metadata", Meta(s.name + "-shard", o, s.name)},
          {"spec",
           {{"serviceName", s.name + "-shard"},
            {"replicas", s.shards},
            {"podManagementPolicy", "Parallel"},
            {"selector", {{"matchLabels", {{"geops/site", s.name}, {"geops/role", "shard"}}}}},
            {"template",
             {{"metadata",
               {{"labels", {{"app.kubernetes.io/name", "geops"}, {"geops/site", s.name}, {"geops/role", "shard"}}},
                {"annotations", ScrapeAnnotations()}}},
              {"spec", pod}}},
            {"volumeClaimTemplates",
             json::array({{{"metadata", {{"name", "store"}}},
                           {"spec",
                            {{"accessModes", {"ReadWriteOnce"}},
                             {"resources", {{"requests", {{"storage", o.storage_size}}}}}}}}})}}}};
}

json WorkerJob(const config::Topology& t, int site, const K8sOptions& o) {
  const config::SiteSpec& s = t.sites[static_cast<size_t>(site)];
  std::string shards;
  for (int k = 0; k < s.shards; ++k) {
    shards += (k ? "," : "") + s.name + "-shard-" + std::to_string(k) + "." + s.name + "-shard:" +
              std::to_string(kK8sLanPort);
  }
  const std::string cmd = "exec geops worker --topology " + std::string(kTopologyPath) + " --site " + s.name +
                          " --worker \"$JOB_COMPLETION_INDEX\" --metrics-port " + std::to_string(kK8sMetricsPort) +
                          " --shards " + shards;
  json volumes = Volumes(s);
  volumes[1]["secret"]["items"] = CertItems(s);
  json pod = {{"restartPolicy", "OnFailure"},
              {"containers",
               json::array({{{"name", "worker"},
                             {"image", o.image},
                             {"command", {"/bin/sh", "-c", cmd}},
                             {"ports", json::array({{{"name", "metrics"}, {"containerPort", kK8sMetricsPort}}})},
                             {"livenessProbe",
                              {{"httpGet", {{"path", "/metrics"}, {"port", kK8sMetricsPort}}},
                               {"initialDelaySeconds", 30},
                               {"periodSeconds", 10},
                               {"failureThreshold", 6}}},
                             {"volumeMounts", Mounts()}}})},
              {"volumes", volumes}};
  if (json a = Affinity(s); !a.is_null()) pod["affinity"] = a;
  return {{"apiVersion", "batch/v1"},
          {"kind", "Job"},
          {"metadata", Meta(s.name + "-worker", o, s.name)},
          {"spec",
           {{"completionMode", "Indexed"},
            {"completions", s.workers},
            {"parallelism", s.workers},
            {"backoffLimit", 100},  // a worker outlives its shards' restarts
            {"template",
             {{"metadata",
               {{"labels", {{"app.kubernetes.io/name", "geops"}, {"geops/site", s.name}, {"geops/role", "worker"}}},
                {"annotations", ScrapeAnnotations()}}},
              {"spec", pod}}}}}};
}

}  // namespace

Result<std::string> K8sTopologyText(const config::Topology& t, const K8sOptions& o) {
  std::istringstream in(o.topology_text);
  std::ostringstream out;
  std::string line, table;
  bool security_seen = false;
  bool wan_seen = false;
  const std::string emulate = std::string("emulate = ") + (o.emulate_links ? "true" : "false") + "\n";
  while (std::getline(in, line)) {
    const std::string trimmed = Trim(line);
    if (!trimmed.empty() && trimmed[0] == '[') {
      table = trimmed.substr(0, trimmed.find(']') + (trimmed.rfind("[[", 0) == 0 ? 2 : 1));
      out << line << "\n";
      if (table == "[[sites]]") {
        out << "host = \"0.0.0.0\"\nbase_port = " << kK8sLanPort << "\nmetrics_base_port = " << kK8sMetricsPort << "\n";
      } else if (table == "[security]") {
        out << "certs = \"" << kCertsPath << "\"\n";
        security_seen = true;
      } else if (table == "[wan]") {
        out << emulate;
        wan_seen = true;
      }
      continue;
    }
    const std::string key = KeyOf(line);
    if (table == "[[sites]]" && (key == "host" || key == "base_port" || key == "metrics_base_port")) continue;
    if (table == "[security]" && (key == "certs" || key == "insecure")) continue;
    if (table == "[wan]" && (key == "emulate" || key == "kernel_rate")) continue;
    if (table == "[wan]" && (key == "trace_dir" || key == "trace_file" || key == "variation")) {
      GEOPS_ASSIGN_OR_RETURN(std::string p, InImage(t, o, key, QuotedValue(line)));
      out << key << " = \"" << p << "\"\n";
      continue;
    }
    out << line << "\n";
  }
  if (!wan_seen) out << "\n[wan]\n" << emulate;
  if (!security_seen) out << "\n[security]\ncerts = \"" << kCertsPath << "\"\n";
  return out.str();
}

Result<std::vector<json>> RenderK8s(const config::Topology& t, const K8sOptions& o) {
  if (!IsDnsLabel(o.namespace_name)) return InvalidArgumentError("namespace '" + o.namespace_name + "' is not a DNS label");
  if (o.certs_dir.empty()) return InvalidArgumentError("--certs is required: the folder `geops certs` wrote");
  for (const config::SiteSpec& s : t.sites) {
    if (!IsDnsLabel(s.name)) {
      return InvalidArgumentError(t.path + ": site name '" + s.name +
                                  "' cannot name Kubernetes objects: use lower-case letters, digits and '-' "
                                  "(at most 40)");
    }
  }
  GEOPS_ASSIGN_OR_RETURN(std::string topology, K8sTopologyText(t, o));
  std::vector<json> out;
  out.push_back({{"apiVersion", "v1"},
                 {"kind", "Namespace"},
                 {"metadata", {{"name", o.namespace_name}, {"labels", {{"app.kubernetes.io/name", "geops"}}}}}});
  out.push_back({{"apiVersion", "v1"},
                 {"kind", "ConfigMap"},
                 {"metadata", Meta("geops-topology", o)},
                 {"data", {{"topology.toml", topology}}}});
  for (int i = 0; i < static_cast<int>(t.sites.size()); ++i) {
    GEOPS_ASSIGN_OR_RETURN(json secret, SiteSecret(t, i, o));
    out.push_back(std::move(secret));
  }
  for (int i = 0; i < static_cast<int>(t.sites.size()); ++i) {
    const config::SiteSpec& s = t.sites[static_cast<size_t>(i)];
    out.push_back(ShardService(s, o));
    out.push_back(ShardStatefulSet(t, i, o));
    out.push_back(WorkerJob(t, i, o));
  }
  return out;
}

}  // namespace geops::cli
