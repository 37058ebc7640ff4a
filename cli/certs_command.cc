// `geops certs TOPOLOGY --out DIR`: makes the deployment's CA and a
// certificate for every site and worker (certs/cert_authority.h), then lists
// what it wrote.
#include <cstdio>
#include <filesystem>

#include "certs/cert_authority.h"
#include "cli/commands.h"

namespace geops::cli {
namespace {

namespace fs = std::filesystem;

// A topology whose sites bind beyond loopback is refused until it names its
// certificates, which is what this command makes: it is read with only that
// rule lifted.
Result<config::Topology> LoadTopologyForCerts(const std::string& path) {
  return config::LoadTopology(path, /*require_tls=*/false);
}

int ExitCode(const Status& s) {
  return s.code() == StatusCode::kInvalidArgument || s.code() == StatusCode::kAlreadyExists ? 2 : 1;
}

// `out_dir` as [security] certs would name it: from the topology's folder
// when it lies under it, else absolute.
std::string CertsSetting(const std::string& topology_path, const std::string& out_dir) {
  std::error_code ec;
  const fs::path from = fs::absolute(topology_path, ec).parent_path().lexically_normal();
  const fs::path to = ec ? fs::path(out_dir) : fs::absolute(out_dir, ec).lexically_normal();
  if (ec) return out_dir;
  const fs::path rel = to.lexically_relative(from);
  if (rel.empty() || *rel.begin() == "..") return to.generic_string();
  return rel.generic_string();
}

}  // namespace

int RunCerts(const CertsArgs& args) {
  Result<config::Topology> topology = LoadTopologyForCerts(args.topology_path);
  if (!topology.ok()) {
    std::fprintf(stderr, "geops certs: %s\n", topology.status().message().c_str());
    return 2;
  }
  Status written = certs::WriteDeploymentCerts(*topology, args.out_dir, args.days, args.force);
  if (!written.ok()) {
    std::fprintf(stderr, "geops certs: %s\n", written.message().c_str());
    return ExitCode(written);
  }
  const certs::DeploymentCertLayout layout = certs::CertLayout(*topology, args.out_dir);
  std::printf("geops certs: wrote the CA of %s, %zu site and %zu worker certificates, valid %d days:\n",
              topology->name.c_str(), layout.sites.size(), layout.workers.size(), args.days);
  std::printf("  %s  %s  CA \"geops CA %s\" (keep ca.key offline)\n", layout.ca.cert_path.c_str(),
              layout.ca.key_path.c_str(), topology->name.c_str());
  for (const auto* group : {&layout.sites, &layout.workers}) {
    for (const certs::CertFiles& f : *group) {
      std::printf("  %s  %s  %s\n", f.cert_path.c_str(), f.key_path.c_str(), f.identity.c_str());
    }
  }
  if (topology->security.certs.empty()) {
    std::printf("to use them, set in %s:\n  [security]\n  certs = \"%s\"%s\n", args.topology_path.c_str(),
                CertsSetting(args.topology_path, args.out_dir).c_str(),
                topology->security.insecure ? "\n(and remove insecure = true)" : "");
  }
  return 0;
}

}  // namespace geops::cli
