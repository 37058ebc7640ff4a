// `geops launch TOPOLOGY.toml --out DIR`: the command-line entry point that
// runs a whole topology on this machine (see launcher.h for what a launch
// does and what the results folder holds). This file checks the arguments,
// reads the topology and prepares the results folder; cli/main.cc parses the
// flags into LaunchArgs.
//
// RunLaunch blocks the calling thread for the whole launch and installs
// SIGINT/SIGTERM handlers while it runs; call it from the main thread, once
// at a time.
#ifndef GEOPS_CLI_LAUNCH_COMMAND_H_
#define GEOPS_CLI_LAUNCH_COMMAND_H_

#include <string>

#include "common/status.h"

namespace geops::cli {

struct LaunchArgs {
  std::string topology_path;            // the topology TOML file
  std::string out_dir;                  // results folder; created (mkdir -p) if missing
  std::string geops_binary;             // program spawned as `site` / `worker`; empty = this executable
  double timeout_seconds = 3600;        // whole launch, seconds; then everything is stopped (exit 1)
  bool force_plain = false;             // plain progress lines even on a terminal
  double listen_timeout_seconds = 30;   // for every shard to print "listening", seconds
  double stop_timeout_seconds = 10;     // SIGTERM -> SIGKILL grace when stopping, seconds
  bool resume = false;                  // continue the run out_dir holds (run_folder.h)
  bool replace = false;                 // delete the run out_dir holds, then start afresh
  int max_restarts = 3;                 // per process that dies on its own (restart_budget.h)
};

// Runs the launch. Returns the process exit code:
//   0    every worker finished cleanly;
//   1    a child failed, shards did not listen in time, or the launch timed out;
//   2    bad arguments, an unreadable or invalid topology, or an unusable
//        results folder: one that another launch holds, or that holds
//        another run while neither resume nor replace is set (a one-line
//        error on stderr; nothing was started);
//   130  interrupted by SIGINT (143 by SIGTERM): everything was stopped and a
//        partial summary.json (with "interrupted": true) written.
int RunLaunch(const LaunchArgs& args);

// `path` made absolute and normal (as is when that fails).
std::string AbsolutePath(const std::string& path);

// The program to spawn for `site` and `worker`: `given`, or this executable
// when empty; absolute, and checked to be executable (InvalidArgument why not).
Result<std::string> ResolveGeopsBinary(const std::string& given);

// Creates `dir` (mkdir -p); InvalidArgument naming it when that fails.
Status MakeResultsFolder(const std::string& dir);

// Each child holds a log file and three pipes open in the supervisor; a
// large topology needs more descriptors than the usual soft limit of 1024.
void RaiseOpenFileLimit();

}  // namespace geops::cli

#endif  // GEOPS_CLI_LAUNCH_COMMAND_H_
