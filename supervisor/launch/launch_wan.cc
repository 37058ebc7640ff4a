#include "supervisor/launch/launch_wan.h"

#include <filesystem>

#include <nlohmann/json.hpp>

#include "supervisor/launch/summary.h"

namespace geops::supervisor {

std::string PeersFilePath(const std::string& out_dir) { return out_dir + "/wan/peers.json"; }

std::vector<std::string> WanSiteArguments(const config::Topology& t, const std::string& out_dir, const std::string& run_id) {
  if (!t.multi_site()) return {};
  std::vector<std::string> args = {"--peers-file", PeersFilePath(out_dir)};
  if (!run_id.empty()) {
    args.push_back("--run-id");
    args.push_back(run_id);
  }
  return args;
}

Status WritePeersFile(const config::Topology& t, const std::string& out_dir, const std::string& run_id,
                      const std::map<std::pair<int, int>, std::string>& mirrors) {
  nlohmann::json doc = {{"mirrors", nlohmann::json::object()}};
  if (!run_id.empty()) doc["run_id"] = run_id;
  for (int s = 0; s < static_cast<int>(t.sites.size()); ++s) {
    nlohmann::json list = nlohmann::json::array();
    for (int i = 0; i < t.sites[s].shards; ++i) {
      auto it = mirrors.find({s, i});
      if (it == mirrors.end() || it->second.empty()) {
        return InvalidArgumentError("shard " + std::to_string(i) + " of site " + t.sites[s].name +
                                    " listens without a mirror address");
      }
      list.push_back(it->second);
    }
    doc["mirrors"][t.sites[s].name] = list;
  }
  std::error_code ec;
  std::filesystem::create_directories(out_dir + "/wan", ec);
  if (ec) return UnavailableError("cannot create " + out_dir + "/wan: " + ec.message());
  return WriteJsonAtomically(PeersFilePath(out_dir), doc);
}

}  // namespace geops::supervisor
