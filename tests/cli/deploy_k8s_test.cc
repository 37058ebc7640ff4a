// `geops deploy k8s`: the manifests of the default topology, the topology
// the pods read, the command lines (those of experiments/run_netns.sh), and
// offline validation against the Kubernetes schemas (kubernetes-models, run
// by node when deploy/k8s/validate has its node_modules: scripts/setup.sh
// installs them).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "cli/commands.h"
#include "cli/deploy_k8s.h"
#include "config/topology.h"

namespace geops::cli {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

class DeployK8sTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("geops-k8s-" + std::to_string(getpid()));
    fs::remove_all(dir_);
    CertsArgs c;
    c.topology_path = Topology();
    c.out_dir = (dir_ / "certs").string();
    ASSERT_EQ(RunCerts(c), 0);
  }
  void TearDown() override { fs::remove_all(dir_); }

  static std::string Topology() { return std::string(GEOPS_SOURCE_DIR) + "/experiments/topologies/default.toml"; }
  static std::string Read(const fs::path& p) {
    std::ifstream in(p);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
  }
  K8sOptions Options() const {
    K8sOptions o;
    o.certs_dir = (dir_ / "certs").string();
    o.topology_text = Read(Topology());
    o.repo_root = GEOPS_SOURCE_DIR;
    return o;
  }
  static int Run(const std::string& cmd) {
    const int status = std::system((cmd + " > /dev/null 2>&1").c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  fs::path dir_;
};

const json* Find(const std::vector<json>& objs, const std::string& kind, const std::string& name) {
  for (const json& o : objs) {
    if (o["kind"] == kind && o["metadata"]["name"] == name) return &o;
  }
  return nullptr;
}

TEST_F(DeployK8sTest, RendersEverySitesShardsWorkersServicesAndSecrets) {
  auto t = config::LoadTopology(Topology());
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  auto objs = RenderK8s(*t, Options());
  ASSERT_TRUE(objs.ok()) << objs.status().ToString();
  EXPECT_EQ(objs->size(), 2u + 4u * 3u);  // namespace, topology, and per site secret, service, shards, workers
  const json* sts = Find(*objs, "StatefulSet", "us-east-1-shard");
  ASSERT_NE(sts, nullptr);
  EXPECT_EQ((*sts)["spec"]["replicas"], 1);
  EXPECT_EQ((*sts)["spec"]["volumeClaimTemplates"][0]["metadata"]["name"], "store");
  const json& pod = (*sts)["spec"]["template"];
  EXPECT_EQ(pod["metadata"]["annotations"]["prometheus.io/scrape"], "true");
  EXPECT_EQ(pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
               ["nodeSelectorTerms"][0]["matchExpressions"][0]["values"][0],
            "us-east-1");
  const json& shard = pod["spec"]["containers"][0];
  EXPECT_TRUE(shard.contains("readinessProbe"));
  EXPECT_TRUE(shard.contains("livenessProbe"));
  const std::string cmd = shard["command"][2];
  EXPECT_NE(cmd.find("geops site --topology /etc/geops/topology.toml --site us-east-1 --shard \"$ORD\""),
            std::string::npos) << cmd;
  EXPECT_NE(cmd.find("eu-west-1=eu-west-1-shard-$ORD.eu-west-1-shard:8000"), std::string::npos) << cmd;
  const json* job = Find(*objs, "Job", "eu-west-1-worker");
  ASSERT_NE(job, nullptr);
  EXPECT_EQ((*job)["spec"]["completionMode"], "Indexed");
  EXPECT_EQ((*job)["spec"]["completions"], 2);
  const std::string wcmd = (*job)["spec"]["template"]["spec"]["containers"][0]["command"][2];
  EXPECT_NE(wcmd.find("geops worker --topology /etc/geops/topology.toml --site eu-west-1 --worker "
                      "\"$JOB_COMPLETION_INDEX\""),
            std::string::npos) << wcmd;
  EXPECT_NE(wcmd.find("--shards eu-west-1-shard-0.eu-west-1-shard:7000"), std::string::npos);
  const json* secret = Find(*objs, "Secret", "ap-northeast-1-certs");
  ASSERT_NE(secret, nullptr);
  for (const char* key : {"ca.pem", "site.pem", "site.key", "worker-0.pem", "worker-1.key"}) {
    EXPECT_TRUE((*secret)["data"].contains(key)) << key;
  }
  EXPECT_FALSE((*secret)["data"].contains("ca.key"));  // the CA's key never leaves the operator
  const json* svc = Find(*objs, "Service", "us-east-1-shard");
  ASSERT_NE(svc, nullptr);
  EXPECT_EQ((*svc)["spec"]["clusterIP"], "None");
}

TEST_F(DeployK8sTest, ThePodsTopologyBindsEveryAddressWithTlsAndTheImagesTraces) {
  auto t = config::LoadTopology(Topology());
  ASSERT_TRUE(t.ok());
  auto text = K8sTopologyText(*t, Options());
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  // It is a valid topology, TLS required (beyond loopback) and satisfied.
  auto pods = config::ParseTopology(*text, "configmap", /*require_tls=*/true);
  ASSERT_TRUE(pods.ok()) << pods.status().ToString() << "\n" << *text;
  ASSERT_EQ(pods->sites.size(), 3u);
  for (const config::SiteSpec& s : pods->sites) {
    EXPECT_EQ(s.host, "0.0.0.0");
    EXPECT_EQ(s.base_port, kK8sLanPort);
    EXPECT_EQ(s.MetricsPort(true, 0), kK8sMetricsPort);
  }
  EXPECT_TRUE(pods->tls());
  EXPECT_EQ(pods->wan.trace_dir, "/opt/geops/experiments/traces/skyplane-aws3");
  // Across real regions the network is the link: the pods replay nothing.
  EXPECT_FALSE(pods->wan.emulate);
}

TEST_F(DeployK8sTest, ThePodsReplayTheLinksOnlyWhenAsked) {
  auto t = config::LoadTopology(Topology());
  ASSERT_TRUE(t.ok());
  K8sOptions o = Options();
  o.emulate_links = true;
  auto text = K8sTopologyText(*t, o);
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  auto pods = config::ParseTopology(*text, "configmap", /*require_tls=*/true);
  ASSERT_TRUE(pods.ok()) << pods.status().ToString() << "\n" << *text;
  EXPECT_TRUE(pods->wan.emulate);
  EXPECT_FALSE(pods->wan.kernel_rate) << "no tc in the pods: geops shapes the rate itself";
  // A topology without a [wan] table gets one.
  std::string plain = *text;
  const size_t wan = plain.find("[wan]");
  ASSERT_NE(wan, std::string::npos);
  K8sOptions again = Options();
  again.topology_text = plain.substr(0, wan) + plain.substr(plain.find("\n[", wan + 1) + 1);
  auto text2 = K8sTopologyText(*t, again);
  ASSERT_TRUE(text2.ok());
  auto pods2 = config::ParseTopology(*text2, "configmap", /*require_tls=*/true);
  ASSERT_TRUE(pods2.ok()) << pods2.status().ToString() << "\n" << *text2;
  EXPECT_FALSE(pods2->wan.emulate);
}

TEST_F(DeployK8sTest, TheCommandLinesAreThoseOfTheMultiHostRun) {
  // experiments/run_netns.sh gives every site base_port 7000 (LAN 7000,
  // mirror 7000 + 1000) and metrics_base_port 9100, and starts `geops site
  // --topology T --site S --shard K` and `geops worker --topology T --site S
  // --worker W`: the pods use the same ports and subcommands.
  const std::string script = Read(fs::path(GEOPS_SOURCE_DIR) / "experiments/run_netns.sh");
  EXPECT_NE(script.find("base_port = " + std::to_string(kK8sLanPort)), std::string::npos);
  EXPECT_EQ(kK8sMirrorPort, kK8sLanPort + 1000);
  EXPECT_NE(script.find("metrics_base_port = " + std::to_string(kK8sMetricsPort)), std::string::npos);
  EXPECT_NE(script.find("\"$geops\" site --topology \"$topo\" --site \"$s\" --shard \"$k\""), std::string::npos);
  EXPECT_NE(script.find("\"$geops\" worker --topology \"$topo\" --site \"$s\" --worker \"$w\""), std::string::npos);
}

TEST_F(DeployK8sTest, RefusesNamesKubernetesCannotTakeAndMissingCertificates) {
  auto t = config::LoadTopology(Topology());
  ASSERT_TRUE(t.ok());
  config::Topology bad = *t;
  bad.sites[0].name = "US_East";
  auto r = RenderK8s(bad, Options());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("US_East"), std::string::npos);
  K8sOptions o = Options();
  o.certs_dir = (dir_ / "nowhere").string();
  EXPECT_EQ(RenderK8s(*t, o).status().code(), StatusCode::kNotFound);
  o.certs_dir.clear();
  EXPECT_EQ(RenderK8s(*t, o).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(DeployK8sTest, TheManifestsPassTheKubernetesSchemasOffline) {
  const fs::path validator = fs::path(GEOPS_SOURCE_DIR) / "deploy/k8s/validate";
  if (Run("node --version") != 0 || !fs::exists(validator / "node_modules/kubernetes-models")) {
    GTEST_SKIP() << "no node or no " << (validator / "node_modules").string()
                 << " (scripts/setup.sh installs them: npm ci in deploy/k8s/validate)";
  }
  DeployArgs d;
  d.topology_path = Topology();
  d.out_dir = (dir_ / "out").string();
  d.certs_dir = (dir_ / "certs").string();
  d.repo_root = GEOPS_SOURCE_DIR;
  ASSERT_EQ(RunDeployK8s(d), 0);
  const std::string node = "node " + (validator / "validate.mjs").string() + " ";
  EXPECT_EQ(Run(node + (dir_ / "out/geops.yaml").string()), 0);
  // The validator is not a rubber stamp: a port that is not a number fails.
  std::string text = Read(dir_ / "out/geops.yaml");
  const size_t at = text.find("\"containerPort\": 7000");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, std::string("\"containerPort\": 7000").size(), "\"containerPort\": \"lan\"");
  std::ofstream(dir_ / "bad.yaml") << text;
  EXPECT_EQ(Run(node + (dir_ / "bad.yaml").string()), 1);
}

}  // namespace
}  // namespace geops::cli
