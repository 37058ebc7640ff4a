#include "supervisor/launch/run_folder.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <random>

#include <nlohmann/json.hpp>

#include "supervisor/launch/launch_wan.h"
#include "supervisor/launch/summary.h"

namespace geops::supervisor {
namespace fs = std::filesystem;
namespace {

constexpr const char* kRecord = "run.json";
constexpr const char* kLock = ".geops-launch.lock";

std::string NewRunId() {
  std::random_device rd;
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%08x%08x", rd(), rd());
  return buf;
}

double UnixSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string UtcText(double unix_seconds) {
  const std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

nlohmann::json ReadRecord(const fs::path& path) {
  std::ifstream in(path);
  if (!in) return nlohmann::json::object();
  nlohmann::json doc = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  return doc.is_object() ? doc : nlohmann::json::object();  // none, or not ours: no record
}

bool NonEmptyDir(const fs::path& p) {
  std::error_code ec;
  return fs::is_directory(p, ec) && !fs::is_empty(p, ec);
}

// The topology's shard stores that hold something.
std::vector<std::string> UsedStores(const config::Topology& t, const std::string& out_dir) {
  std::vector<std::string> used;
  for (int s = 0; s < static_cast<int>(t.sites.size()); ++s) {
    for (int i = 0; i < t.sites[s].shards; ++i) {
      const std::string dir = t.ShardDataDir(s, i, out_dir);
      if (!dir.empty() && NonEmptyDir(dir)) used.push_back(dir);
    }
  }
  return used;
}

}  // namespace

const std::vector<std::string>& RunFolder::RunEntries() {
  static const std::vector<std::string> entries = {kRecord,   "events.jsonl", "summary.json", "prometheus_targets.json",
                                                   "logs",    "metrics",      "wan"};
  return entries;
}

Result<std::unique_ptr<RunFolder>> RunFolder::Claim(const std::string& out_dir, const config::Topology& topology,
                                                    const std::string& topology_path, RunFolderMode mode) {
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec || !fs::is_directory(out_dir)) {
    return UnavailableError("cannot create results folder " + out_dir + ": " +
                            (ec ? ec.message() : std::string("not a directory")));
  }
  std::unique_ptr<RunFolder> f(new RunFolder());
  f->dir_ = out_dir;
  f->topology_path_ = topology_path;
  const fs::path dir(out_dir);
  const nlohmann::json previous = ReadRecord(dir / kRecord);

  const std::string lock_path = (dir / kLock).string();
  f->lock_fd_ = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (f->lock_fd_ < 0) return UnavailableError("cannot open " + lock_path + ": " + std::strerror(errno));
  if (::flock(f->lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    std::string holder = previous.contains("launcher_pid") ? " (pid " + previous["launcher_pid"].dump() + ")" : "";
    return FailedPreconditionError("results folder " + out_dir + " is in use by another geops launch" + holder +
                                   "; wait for it to end or choose another --out");
  }

  // What of another run is here.
  std::vector<std::string> found;
  for (const std::string& e : RunEntries()) {
    if (fs::exists(dir / e, ec)) found.push_back(e);
  }
  const std::vector<std::string> stores = UsedStores(topology, out_dir);
  for (const std::string& s : stores) found.push_back(fs::path(s).lexically_relative(dir).string());
  const bool held = !found.empty();
  std::string what;
  for (const std::string& e : found) what += (what.empty() ? "" : ", ") + e;
  std::string described = "another run";
  if (previous.contains("run_id")) {
    described = "run " + previous.value("run_id", std::string("?"));
    if (previous.contains("started_unix") && previous["started_unix"].is_number()) {
      described += " (started " + UtcText(previous["started_unix"].get<double>());
      described += ", topology " + previous.value("topology", std::string("?")) + ", " +
                   previous.value("state", std::string("state unknown")) + ")";
    }
  }

  if (held && mode == RunFolderMode::kNew) {
    return FailedPreconditionError("results folder " + out_dir + " holds " + described + " (" + what +
                                   "); pass --resume to continue it (its shard stores and the workers' clocks are "
                                   "kept), --replace to delete it and start afresh, or choose another --out");
  }
  if (held && mode == RunFolderMode::kReplace) {
    for (const std::string& e : RunEntries()) {
      fs::remove_all(dir / e, ec);
      if (ec) return UnavailableError("cannot delete " + (dir / e).string() + ": " + ec.message());
    }
    for (const std::string& s : stores) {
      fs::remove_all(s, ec);
      if (ec) return UnavailableError("cannot delete shard store " + s + ": " + ec.message());
    }
    f->note_ = "deleted " + described + " from " + out_dir + " (" + what + ")";
  }
  if (mode == RunFolderMode::kResume) {
    f->resumed_run_ = previous.value("run_id", std::string());
    f->note_ = held ? "resuming " + described + " in " + out_dir
                    : "nothing to resume in " + out_dir + "; starting afresh";
  }
  // A peers file is only ever this run's: the shards wait for the one the
  // launcher writes once they all listen.
  fs::remove(PeersFilePath(out_dir), ec);
  if (ec) return UnavailableError("cannot delete the stale peers file " + PeersFilePath(out_dir) + ": " + ec.message());

  f->run_id_ = NewRunId();
  f->started_unix_ = UnixSeconds();
  GEOPS_RETURN_IF_ERROR(f->WriteRecord("running"));
  return f;
}

RunFolder::~RunFolder() {
  if (lock_fd_ >= 0) ::close(lock_fd_);  // releases the flock
}

Status RunFolder::WriteRecord(const std::string& state) {
  nlohmann::json doc = {{"run_id", run_id_},
                        {"topology", topology_path_},
                        {"started_unix", started_unix_},
                        {"launcher_pid", static_cast<int64_t>(::getpid())},
                        {"state", state}};
  if (!resumed_run_.empty()) doc["resumes"] = resumed_run_;
  return WriteJsonAtomically((fs::path(dir_) / kRecord).string(), doc);
}

Status RunFolder::Finish(const std::string& exit) { return WriteRecord(exit.empty() ? "ended" : exit); }

}  // namespace geops::supervisor
