// RunFolder: `geops launch` owns its results folder for the length of a run.
//
// A folder holds one run. Claim() takes it:
//   - a lock (flock on OUT/.geops-launch.lock) held until the RunFolder
//     goes away, so two launches never share a folder;
//   - a folder that holds another run (its run.json, or the files a run
//     writes: events.jsonl, summary.json, logs/, metrics/, wan/, or shard
//     stores of the topology's [storage]) is refused unless the caller says
//     what to do with it: kResume keeps it (stores, logs and metrics go on;
//     the shards resume from their stores), kReplace deletes what a run
//     wrote there (and the topology's shard stores) first;
//   - a stale peers file (wan/peers.json, which the shards wait for) is
//     always removed, and each run gets a new id that the launcher writes
//     into the peers file and hands to its shards (--run-id), so no shard
//     ever reads another run's peers;
//   - run.json says which run holds the folder: its id, topology, start,
//     the launcher's pid, and its state ("running", then how it ended).
//
// Not thread-safe; one launcher uses it from its main thread.
#ifndef GEOPS_SUPERVISOR_LAUNCH_RUN_FOLDER_H_
#define GEOPS_SUPERVISOR_LAUNCH_RUN_FOLDER_H_

#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "config/topology.h"

namespace geops::supervisor {

enum class RunFolderMode {
  kNew,      // refuse a folder holding another run
  kResume,   // continue the run the folder holds (or start one where there is none)
  kReplace,  // delete the run the folder holds, then start afresh
};

class RunFolder {
 public:
  // Takes `out_dir` (created if missing) for a run of `topology` (read from
  // `topology_path`). FailedPrecondition when another launch holds the
  // folder, or when it holds another run and mode is kNew (the message says
  // what the run was and which flag to pass); Unavailable when the folder
  // cannot be created, locked, cleared or written.
  static Result<std::unique_ptr<RunFolder>> Claim(const std::string& out_dir, const config::Topology& topology,
                                                  const std::string& topology_path, RunFolderMode mode);
  ~RunFolder();  // releases the lock
  RunFolder(const RunFolder&) = delete;
  RunFolder& operator=(const RunFolder&) = delete;

  const std::string& run_id() const { return run_id_; }
  // The id of the run this one continues (kResume), or "".
  const std::string& resumed_run() const { return resumed_run_; }
  // What Claim deleted (kReplace) or found (kResume), for one line of output.
  const std::string& note() const { return note_; }

  // Records in run.json how the run ended ("ok", "failed", ...).
  Status Finish(const std::string& exit);

  // The entries a run writes in its folder, relative to it.
  static const std::vector<std::string>& RunEntries();

 private:
  RunFolder() = default;
  Status WriteRecord(const std::string& state);

  std::string dir_;
  std::string topology_path_;
  std::string run_id_;
  std::string resumed_run_;
  std::string note_;
  double started_unix_ = 0;
  int lock_fd_ = -1;
};

}  // namespace geops::supervisor

#endif  // GEOPS_SUPERVISOR_LAUNCH_RUN_FOLDER_H_
