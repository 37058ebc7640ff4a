#include "cli/launch_command.h"

#include <sys/resource.h>
#include <unistd.h>
#include <uv.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "config/topology.h"
#include "supervisor/launch/launcher.h"
#include "supervisor/launch/run_folder.h"
#include "supervisor/launch/worker_env.h"

namespace geops::cli {
namespace {

int BadArgs(const std::string& message) {
  std::fprintf(stderr, "geops launch: %s\n", message.c_str());
  return 2;
}

}  // namespace

std::string AbsolutePath(const std::string& path) {
  std::error_code ec;
  std::filesystem::path abs = std::filesystem::absolute(path, ec);
  return ec ? path : abs.lexically_normal().string();
}

Result<std::string> ResolveGeopsBinary(const std::string& given) {
  std::string binary = given;
  if (binary.empty()) {
    char buf[4096];
    size_t size = sizeof(buf);
    if (uv_exepath(buf, &size) != 0) return InvalidArgumentError("cannot find the geops executable's own path");
    binary.assign(buf, size);
  }
  if (::access(binary.c_str(), X_OK) != 0) {
    return InvalidArgumentError("cannot execute " + binary + ": " + std::strerror(errno));
  }
  return AbsolutePath(binary);
}

Status MakeResultsFolder(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || !std::filesystem::is_directory(dir)) {
    return InvalidArgumentError("cannot create results folder " + dir + ": " +
                                (ec ? ec.message() : std::string("not a directory")));
  }
  return Status::Ok();
}

void RaiseOpenFileLimit() {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
}

int RunLaunch(const LaunchArgs& args) {
  if (args.topology_path.empty()) return BadArgs("missing topology file");
  if (args.out_dir.empty()) return BadArgs("missing --out DIR");
  if (!(args.timeout_seconds > 0)) return BadArgs("--timeout must be > 0 seconds");
  if (!(args.listen_timeout_seconds > 0)) return BadArgs("listen timeout must be > 0 seconds");
  if (!(args.stop_timeout_seconds >= 0)) return BadArgs("stop timeout must be >= 0 seconds");

  Result<config::Topology> topology = config::LoadTopology(args.topology_path);
  if (!topology.ok()) return BadArgs(topology.status().message());

  Result<std::string> binary = ResolveGeopsBinary(args.geops_binary);
  if (!binary.ok()) return BadArgs(binary.status().message());
  if (args.resume && args.replace) return BadArgs("--resume and --replace exclude each other");
  const supervisor::RunFolderMode mode =
      args.resume ? supervisor::RunFolderMode::kResume : args.replace ? supervisor::RunFolderMode::kReplace : supervisor::RunFolderMode::kNew;
  Result<std::unique_ptr<supervisor::RunFolder>> folder =
      supervisor::RunFolder::Claim(AbsolutePath(args.out_dir), *topology, AbsolutePath(args.topology_path), mode);
  if (!folder.ok()) return BadArgs(folder.status().message());
  if (!(*folder)->note().empty()) std::fprintf(stdout, "geops launch: %s\n", (*folder)->note().c_str());
  RaiseOpenFileLimit();

  supervisor::LauncherOptions o;
  o.topology = std::move(topology).value();
  o.topology_path = AbsolutePath(args.topology_path);
  o.out_dir = AbsolutePath(args.out_dir);
  o.geops_binary = *binary;
  o.python_path = supervisor::FindPythonPackage(o.geops_binary);
  o.timeout_seconds = args.timeout_seconds;
  o.listen_timeout_seconds = args.listen_timeout_seconds;
  o.stop_timeout_seconds = args.stop_timeout_seconds;
  o.run_id = (*folder)->run_id();
  o.restarts.max_restarts = args.max_restarts;
  o.resume = args.resume;
  const char* term = std::getenv("TERM");
  o.live_display = !args.force_plain && ::isatty(STDOUT_FILENO) && !(term && std::strcmp(term, "dumb") == 0);
  const int code = supervisor::RunLauncher(o);
  const char* state = code == 0 ? "ok" : code == 1 ? "failed" : code >= 128 ? "interrupted" : "error";
  if (Status s = (*folder)->Finish(state); !s.ok()) std::fprintf(stderr, "geops launch: %s\n", s.message().c_str());
  return code;
}

}  // namespace geops::cli
