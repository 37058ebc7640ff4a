// ProcessManager: starts child processes on a libuv loop, splits their
// output into lines, appends every line to the child's log file, keeps the
// last few lines for error reports, and stops children with a grace period
// (SIGTERM, then SIGKILL by PID). It only ever signals processes it started,
// and never one whose exit it has already seen (so a recycled PID is safe).
//
// A child is "finished" once it has exited and both of its output pipes have
// reached end of file (or, if a grandchild keeps them open, a short drain
// period has passed); the exit callback runs then, so every line a child
// printed before exiting has been delivered before its exit is.
//
// Children run in their own session (setsid), so a Ctrl-C typed at the
// terminal reaches only the launcher, which then stops them in order. Each
// child's stdin is a pipe the manager holds open and never writes: a child
// sees end of file on stdin when the launcher is gone, even after kill -9.
//
// Thread-safety: none. Every method must be called on the thread running the
// loop, and callbacks run on that thread. Callbacks may call back into the
// manager (Spawn, Signal, StopAll).
//
// Lifetime: call Close() when done, then run the loop until it returns (the
// handles close asynchronously); only then may the manager be destroyed.
#ifndef GEOPS_SUPERVISOR_LAUNCH_PROCESS_MANAGER_H_
#define GEOPS_SUPERVISOR_LAUNCH_PROCESS_MANAGER_H_

#include <uv.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace geops::supervisor {

struct ProcessSpec {
  std::string name;               // for messages, e.g. "us-east-1-worker-0"
  std::vector<std::string> argv;  // argv[0] is the program to execute (a path)
  std::string log_path;           // every output line is written here (truncated first); empty = no log
  bool append_log = false;        // append to log_path instead of truncating it (a restarted child)
  // The child's whole environment, "NAME=value" each; empty: the launcher's.
  std::vector<std::string> env;
  std::string cwd;                // working directory; empty: the launcher's
};

struct ProcessExit {
  int64_t exit_status = 0;       // exit code; meaningful when term_signal == 0
  int term_signal = 0;           // signal that ended it, or 0
  bool signalled_by_us = false;  // the manager had sent it a signal before it ended
  bool abandoned = false;        // never seen to exit after SIGKILL; the manager gave up on it

  bool clean() const { return term_signal == 0 && exit_status == 0 && !abandoned; }
  // "exit code 3", "signal 9 (Killed)", "never exited after SIGKILL".
  std::string Describe() const;
};

enum class OutputStream { kStdout, kStderr };

struct ProcessManagerOptions {
  size_t tail_lines = 10;              // lines kept per child for Tail()
  std::string tail_exclude_prefix;     // lines starting with this are not kept in the tail
  double drain_seconds = 1.0;          // after exit, wait this long for pipes to close
  double kill_wait_seconds = 5.0;      // after SIGKILL, wait this long before abandoning
  size_t max_line_bytes = 1 << 20;     // a longer line is cut and delivered in pieces
};

class ProcessManager {
 public:
  // Called for every complete line (without the newline) a child writes.
  using LineCallback = std::function<void(int id, OutputStream stream, std::string_view line)>;
  // Called once per child that was spawned, when it is finished (see above).
  using ExitCallback = std::function<void(int id, const ProcessExit& exit)>;

  // `loop` must outlive the manager.
  explicit ProcessManager(uv_loop_t* loop, ProcessManagerOptions options = {});
  ~ProcessManager();
  ProcessManager(const ProcessManager&) = delete;
  ProcessManager& operator=(const ProcessManager&) = delete;

  void set_line_callback(LineCallback cb) { on_line_ = std::move(cb); }
  void set_exit_callback(ExitCallback cb) { on_exit_ = std::move(cb); }

  // Starts a child. Returns its id (0, 1, 2, ... in spawn order).
  // Errors: InvalidArgument (empty argv), Unavailable (the log file cannot be
  // opened, or the program cannot be executed; the message says why),
  // FailedPrecondition (after Close()). On error no callback will run for it.
  Result<int> Spawn(const ProcessSpec& spec);

  // Sends `signum` to child `id` if it has not exited yet; a no-op otherwise.
  // Errors: NotFound (unknown id), Unavailable (kill failed).
  Status Signal(int id, int signum);

  // Sends SIGTERM to every live child, and SIGKILL to those still alive
  // `grace_seconds` later. `done` runs once no child is live (at once, before
  // returning, if none is). A second call re-arms with the shorter deadline
  // and replaces `done`. Does not block.
  void StopAll(double grace_seconds, std::function<void()> done);
  // SIGKILL to every live child now.
  void KillAll();

  // Closes every handle. REQUIRES: no live child (call StopAll first and wait
  // for `done`); live children are SIGKILLed and abandoned otherwise.
  void Close();

  bool live(int id) const;  // spawned and not yet finished
  int live_count() const { return live_count_; }
  int size() const { return static_cast<int>(children_.size()); }
  int pid(int id) const;
  const std::string& name(int id) const;
  // The last lines (up to options.tail_lines) the child wrote, oldest first.
  std::vector<std::string> Tail(int id) const;

 private:
  struct Child;

  static void OnAlloc(uv_handle_t* handle, size_t suggested, uv_buf_t* buf);
  static void OnRead(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf);
  static void OnProcessExit(uv_process_t* process, int64_t exit_status, int term_signal);
  static void OnKillTimer(uv_timer_t* timer);
  static void OnDrainTimer(uv_timer_t* timer);
  static void OnHandleClosed(uv_handle_t* handle);

  void HandleData(Child* c, OutputStream stream, const char* data, size_t n, bool eof);
  void EmitLine(Child* c, OutputStream stream, std::string_view line);
  void CloseStream(Child* c, OutputStream stream);
  void MaybeFinish(Child* c, bool force);
  void CheckStopped();
  void ArmDrainTimer();
  void CloseHandle(uv_handle_t* handle);

  uv_loop_t* loop_;
  ProcessManagerOptions options_;
  std::vector<std::unique_ptr<Child>> children_;
  int live_count_ = 0;
  LineCallback on_line_;
  ExitCallback on_exit_;
  std::function<void()> stop_done_;
  bool stopping_ = false;
  bool killed_all_ = false;
  bool closed_ = false;
  uv_timer_t kill_timer_;
  uv_timer_t drain_timer_;
  int open_handles_ = 0;
  std::vector<char> read_buffer_;
};

}  // namespace geops::supervisor

#endif  // GEOPS_SUPERVISOR_LAUNCH_PROCESS_MANAGER_H_
