#include "cli/launch/launch_wan.h"

#include <filesystem>

#include <nlohmann/json.hpp>

#include "cli/launch/summary.h"

namespace geops::cli {

std::string PeersFilePath(const std::string& out_dir) { return out_dir + "/wan/peers.json"; }

std::vector<std::string> WanSiteArguments(const Topology& t, const std::string& out_dir) {
  if (!t.multi_site()) return {};
  return {"--peers-file", PeersFilePath(out_dir)};
}

Status WritePeersFile(const Topology& t, const std::string& out_dir,
                      const std::map<std::pair<int, int>, std::string>& mirrors) {
  nlohmann::json doc = {{"mirrors", nlohmann::json::object()}};
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

}  // namespace geops::cli
