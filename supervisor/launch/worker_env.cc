#include "supervisor/launch/worker_env.h"

#include <filesystem>
#include <map>

namespace geops::supervisor {

std::vector<std::string> CommandWorkerEnv(const config::Topology& t, const WorkerEnvArgs& a, char** base) {
  std::map<std::string, std::string> env;
  for (char** e = base; e != nullptr && *e != nullptr; ++e) {
    const std::string entry(*e);
    const size_t eq = entry.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    env[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  int rank = a.worker;
  for (int s = 0; s < a.site; ++s) rank += t.sites[s].workers;
  env["GEOPS_SITE"] = t.sites[a.site].name;
  env["GEOPS_WORKER"] = std::to_string(a.worker);
  env["GEOPS_SITE_INDEX"] = std::to_string(a.site);
  env["GEOPS_NUM_SITES"] = std::to_string(t.sites.size());
  env["GEOPS_WORKERS"] = std::to_string(t.sites[a.site].workers);
  env["GEOPS_RANK"] = std::to_string(rank);
  env["GEOPS_WORLD_SIZE"] = std::to_string(t.total_workers());
  env["GEOPS_SHARDS"] = a.shards;
  env["GEOPS_TOPOLOGY"] = a.topology_path;
  env["GEOPS_CLOCKS"] = std::to_string(t.clocks);
  env["GEOPS_OUT"] = a.out_dir;
  env["GEOPS_EXIT_WITH_PARENT"] = "1";
  env["PYTHONUNBUFFERED"] = "1";  // event lines reach the launcher as they are printed
  if (!a.python_path.empty()) {
    auto it = env.find("PYTHONPATH");
    env["PYTHONPATH"] = it == env.end() || it->second.empty() ? a.python_path : a.python_path + ":" + it->second;
  }
  std::vector<std::string> out;
  out.reserve(env.size());
  for (const auto& [k, v] : env) out.push_back(k + "=" + v);
  return out;
}

WorkerCommand BuildWorkerCommand(const config::Topology& t, const WorkerEnvArgs& a, const std::string& geops_binary,
                                 char** base) {
  WorkerCommand c;
  if (t.command.empty()) {
    c.argv = {geops_binary, "worker", "--topology", a.topology_path, "--site", t.sites[a.site].name, "--worker",
              std::to_string(a.worker), "--shards", a.shards, "--out", a.out_dir, "--exit-with-parent"};
    return c;
  }
  // The user's own program, as torchrun starts one: GEOPS_* tell it who it is.
  c.argv = t.command;
  c.env = CommandWorkerEnv(t, a, base);
  c.cwd = std::filesystem::path(a.topology_path).parent_path().string();
  return c;
}

std::string FindPythonPackage(const std::string& geops_binary) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path dir = fs::absolute(fs::path(geops_binary), ec).parent_path();
  for (const fs::path& candidate : {dir / ".." / "python", dir / "python", dir / ".." / "lib" / "geops" / "python"}) {
    if (fs::exists(candidate / "geops" / "__init__.py", ec)) return fs::weakly_canonical(candidate, ec).string();
  }
  return "";
}

}  // namespace geops::supervisor
