#include "supervisor/launch/process_manager.h"

#include <signal.h>

#include <cstdio>
#include <cstring>
#include <deque>

namespace geops::supervisor {

namespace {
constexpr uint64_t kDrainTickMs = 100;
uint64_t ToMs(double seconds) { return seconds <= 0 ? 0 : static_cast<uint64_t>(seconds * 1000.0); }
}  // namespace

std::string ProcessExit::Describe() const {
  if (abandoned) return "never exited after SIGKILL";
  if (term_signal != 0) {
    const char* name = strsignal(term_signal);
    return "signal " + std::to_string(term_signal) + (name ? std::string(" (") + name + ")" : "");
  }
  return "exit code " + std::to_string(exit_status);
}

struct ProcessManager::Child {
  ProcessManager* owner = nullptr;
  int id = 0;
  std::string name;
  int pid = 0;
  uv_process_t process;
  uv_pipe_t in;
  uv_pipe_t out;
  uv_pipe_t err;
  bool out_open = false;  // reading, not yet at end of file
  bool err_open = false;
  bool exited = false;
  bool finished = false;
  bool signalled = false;
  uint64_t exit_ms = 0;     // loop time of the exit
  uint64_t sigkill_ms = 0;  // loop time SIGKILL was sent, 0 = never
  ProcessExit exit;
  std::string out_partial;
  std::string err_partial;
  FILE* log = nullptr;
  std::deque<std::string> tail;
};

ProcessManager::ProcessManager(uv_loop_t* loop, ProcessManagerOptions options)
    : loop_(loop), options_(std::move(options)), read_buffer_(64 * 1024) {
  uv_timer_init(loop_, &kill_timer_);
  kill_timer_.data = this;
  uv_timer_init(loop_, &drain_timer_);
  drain_timer_.data = this;
}

ProcessManager::~ProcessManager() {
  if (open_handles_ > 0 || !closed_) {
    // Misuse: libuv still references our handles. Leaking them is safer than
    // freeing memory the loop may still touch.
    std::fprintf(stderr, "geops: ProcessManager destroyed with open handles\n");
    for (auto& c : children_) (void)c.release();
  }
  for (auto& c : children_) {
    if (c && c->log) std::fclose(c->log);
  }
}

Result<int> ProcessManager::Spawn(const ProcessSpec& spec) {
  if (closed_) return FailedPreconditionError("process manager is closed");
  if (spec.argv.empty()) return InvalidArgumentError("cannot start " + spec.name + ": empty command");
  auto c = std::make_unique<Child>();
  c->owner = this;
  c->id = static_cast<int>(children_.size());
  c->name = spec.name;
  if (!spec.log_path.empty()) {
    c->log = std::fopen(spec.log_path.c_str(), spec.append_log ? "a" : "w");
    if (c->log == nullptr) {
      return UnavailableError("cannot open log " + spec.log_path + ": " + std::strerror(errno));
    }
  }
  uv_pipe_init(loop_, &c->in, 0);
  uv_pipe_init(loop_, &c->out, 0);
  uv_pipe_init(loop_, &c->err, 0);
  c->in.data = c->out.data = c->err.data = c.get();
  c->process.data = c.get();

  std::vector<char*> args;
  for (const std::string& a : spec.argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  uv_stdio_container_t stdio[3];
  stdio[0].flags = static_cast<uv_stdio_flags>(UV_CREATE_PIPE | UV_READABLE_PIPE);
  stdio[0].data.stream = reinterpret_cast<uv_stream_t*>(&c->in);
  stdio[1].flags = static_cast<uv_stdio_flags>(UV_CREATE_PIPE | UV_WRITABLE_PIPE);
  stdio[1].data.stream = reinterpret_cast<uv_stream_t*>(&c->out);
  stdio[2].flags = static_cast<uv_stdio_flags>(UV_CREATE_PIPE | UV_WRITABLE_PIPE);
  stdio[2].data.stream = reinterpret_cast<uv_stream_t*>(&c->err);
  uv_process_options_t opts;
  std::memset(&opts, 0, sizeof(opts));
  std::vector<char*> env;
  for (const std::string& e : spec.env) env.push_back(const_cast<char*>(e.c_str()));
  env.push_back(nullptr);
  opts.file = args[0];  // without a '/', looked up in PATH
  opts.args = args.data();
  if (!spec.env.empty()) opts.env = env.data();
  if (!spec.cwd.empty()) opts.cwd = spec.cwd.c_str();
  opts.flags = UV_PROCESS_DETACHED;
  opts.stdio_count = 3;
  opts.stdio = stdio;
  opts.exit_cb = &ProcessManager::OnProcessExit;

  Child* raw = c.get();
  children_.push_back(std::move(c));
  int rc = uv_spawn(loop_, &raw->process, &opts);
  if (rc != 0) {
    raw->finished = true;
    CloseHandle(reinterpret_cast<uv_handle_t*>(&raw->process));
    CloseHandle(reinterpret_cast<uv_handle_t*>(&raw->in));
    CloseHandle(reinterpret_cast<uv_handle_t*>(&raw->out));
    CloseHandle(reinterpret_cast<uv_handle_t*>(&raw->err));
    if (raw->log) {
      std::fclose(raw->log);
      raw->log = nullptr;
    }
    return UnavailableError("cannot start " + spec.name + " (" + spec.argv[0] + "): " + uv_strerror(rc));
  }
  raw->pid = raw->process.pid;
  ++live_count_;
  raw->out_open = uv_read_start(reinterpret_cast<uv_stream_t*>(&raw->out), OnAlloc, OnRead) == 0;
  raw->err_open = uv_read_start(reinterpret_cast<uv_stream_t*>(&raw->err), OnAlloc, OnRead) == 0;
  return raw->id;
}

Status ProcessManager::Signal(int id, int signum) {
  if (id < 0 || id >= size()) return NotFoundError("no child " + std::to_string(id));
  Child* c = children_[id].get();
  if (c->exited || c->finished) return Status::Ok();
  c->signalled = true;
  int rc = uv_process_kill(&c->process, signum);
  if (rc != 0 && rc != UV_ESRCH) {
    return UnavailableError("cannot signal " + c->name + ": " + uv_strerror(rc));
  }
  return Status::Ok();
}

void ProcessManager::StopAll(double grace_seconds, std::function<void()> done) {
  stopping_ = true;
  stop_done_ = std::move(done);
  for (int i = 0; i < size(); ++i) {
    Child* c = children_[i].get();
    if (!c->finished && !c->exited && !c->signalled) Signal(i, SIGTERM).IgnoreError();
  }
  uint64_t due = ToMs(grace_seconds);
  if (!killed_all_ && (!uv_is_active(reinterpret_cast<uv_handle_t*>(&kill_timer_)) ||
                       uv_timer_get_due_in(&kill_timer_) > due)) {
    uv_timer_start(&kill_timer_, OnKillTimer, due, 0);
  }
  CheckStopped();
}

void ProcessManager::KillAll() {
  killed_all_ = true;
  uv_timer_stop(&kill_timer_);
  for (int i = 0; i < size(); ++i) {
    Child* c = children_[i].get();
    if (c->finished || c->exited || c->sigkill_ms != 0) continue;
    Signal(i, SIGKILL).IgnoreError();
    c->sigkill_ms = uv_now(loop_) + 1;  // never 0
    ArmDrainTimer();
  }
}

void ProcessManager::Close() {
  if (closed_) return;
  closed_ = true;
  for (auto& c : children_) {
    if (c->finished) continue;
    if (!c->exited) {
      c->signalled = true;
      uv_process_kill(&c->process, SIGKILL);
      c->exit.abandoned = true;
      c->exit.signalled_by_us = true;
    }
    MaybeFinish(c.get(), /*force=*/true);
  }
  CloseHandle(reinterpret_cast<uv_handle_t*>(&kill_timer_));
  CloseHandle(reinterpret_cast<uv_handle_t*>(&drain_timer_));
}

bool ProcessManager::live(int id) const {
  return id >= 0 && id < size() && !children_[id]->finished;
}

int ProcessManager::pid(int id) const { return id >= 0 && id < size() ? children_[id]->pid : 0; }

const std::string& ProcessManager::name(int id) const {
  static const std::string kUnknown = "?";
  return id >= 0 && id < size() ? children_[id]->name : kUnknown;
}

std::vector<std::string> ProcessManager::Tail(int id) const {
  if (id < 0 || id >= size()) return {};
  const auto& t = children_[id]->tail;
  return std::vector<std::string>(t.begin(), t.end());
}

void ProcessManager::OnAlloc(uv_handle_t* handle, size_t /*suggested*/, uv_buf_t* buf) {
  // Reads are consumed synchronously in OnRead, so one buffer serves all pipes.
  ProcessManager* self = static_cast<Child*>(handle->data)->owner;
  buf->base = self->read_buffer_.data();
  buf->len = self->read_buffer_.size();
}

void ProcessManager::OnRead(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf) {
  auto* c = static_cast<Child*>(stream->data);
  ProcessManager* self = c->owner;
  OutputStream which = stream == reinterpret_cast<uv_stream_t*>(&c->out) ? OutputStream::kStdout
                                                                         : OutputStream::kStderr;
  if (nread > 0) {
    self->HandleData(c, which, buf->base, static_cast<size_t>(nread), false);
  } else if (nread < 0) {  // UV_EOF or a read error: either way this stream is done
    self->HandleData(c, which, nullptr, 0, true);
    self->CloseStream(c, which);
    self->MaybeFinish(c, false);
  }
}

void ProcessManager::HandleData(Child* c, OutputStream stream, const char* data, size_t n, bool eof) {
  std::string& partial = stream == OutputStream::kStdout ? c->out_partial : c->err_partial;
  partial.append(data ? data : "", n);
  size_t start = 0;
  for (;;) {
    size_t nl = partial.find('\n', start);
    if (nl == std::string::npos) break;
    size_t end = nl;
    if (end > start && partial[end - 1] == '\r') --end;
    EmitLine(c, stream, std::string_view(partial).substr(start, end - start));
    start = nl + 1;
  }
  partial.erase(0, start);
  while (partial.size() > options_.max_line_bytes) {
    EmitLine(c, stream, std::string_view(partial).substr(0, options_.max_line_bytes));
    partial.erase(0, options_.max_line_bytes);
  }
  if (eof && !partial.empty()) {
    EmitLine(c, stream, partial);
    partial.clear();
  }
  if (c->log) std::fflush(c->log);
}

void ProcessManager::EmitLine(Child* c, OutputStream stream, std::string_view line) {
  if (c->log) {
    std::fwrite(line.data(), 1, line.size(), c->log);
    std::fputc('\n', c->log);
  }
  const std::string& skip = options_.tail_exclude_prefix;
  if (options_.tail_lines > 0 && (skip.empty() || line.substr(0, skip.size()) != skip)) {
    c->tail.emplace_back(line);
    while (c->tail.size() > options_.tail_lines) c->tail.pop_front();
  }
  if (on_line_ && !closed_) on_line_(c->id, stream, line);
}

void ProcessManager::CloseStream(Child* c, OutputStream stream) {
  bool& open = stream == OutputStream::kStdout ? c->out_open : c->err_open;
  uv_pipe_t* pipe = stream == OutputStream::kStdout ? &c->out : &c->err;
  if (open) uv_read_stop(reinterpret_cast<uv_stream_t*>(pipe));
  open = false;
  CloseHandle(reinterpret_cast<uv_handle_t*>(pipe));
}

void ProcessManager::OnProcessExit(uv_process_t* process, int64_t exit_status, int term_signal) {
  auto* c = static_cast<Child*>(process->data);
  ProcessManager* self = c->owner;
  c->exited = true;
  c->exit_ms = uv_now(process->loop);
  c->exit.exit_status = exit_status;
  c->exit.term_signal = term_signal;
  c->exit.signalled_by_us = c->signalled;
  self->MaybeFinish(c, false);
  if (!c->finished) self->ArmDrainTimer();
}

void ProcessManager::MaybeFinish(Child* c, bool force) {
  if (c->finished) return;
  if (!force && !(c->exited && !c->out_open && !c->err_open)) return;
  if (c->out_open) {
    HandleData(c, OutputStream::kStdout, nullptr, 0, true);
    CloseStream(c, OutputStream::kStdout);
  }
  if (c->err_open) {
    HandleData(c, OutputStream::kStderr, nullptr, 0, true);
    CloseStream(c, OutputStream::kStderr);
  }
  c->finished = true;
  CloseHandle(reinterpret_cast<uv_handle_t*>(&c->out));
  CloseHandle(reinterpret_cast<uv_handle_t*>(&c->err));
  CloseHandle(reinterpret_cast<uv_handle_t*>(&c->in));
  CloseHandle(reinterpret_cast<uv_handle_t*>(&c->process));
  if (c->log) {
    std::fclose(c->log);
    c->log = nullptr;
  }
  --live_count_;
  if (on_exit_ && !closed_) on_exit_(c->id, c->exit);
  CheckStopped();
}

void ProcessManager::CheckStopped() {
  if (!stopping_ || live_count_ > 0 || !stop_done_) return;
  uv_timer_stop(&kill_timer_);
  std::function<void()> done = std::move(stop_done_);
  stop_done_ = nullptr;
  if (!closed_) done();
}

void ProcessManager::OnKillTimer(uv_timer_t* timer) { static_cast<ProcessManager*>(timer->data)->KillAll(); }

void ProcessManager::ArmDrainTimer() {
  if (closed_ || uv_is_active(reinterpret_cast<uv_handle_t*>(&drain_timer_))) return;
  uv_timer_start(&drain_timer_, OnDrainTimer, kDrainTickMs, kDrainTickMs);
}

void ProcessManager::OnDrainTimer(uv_timer_t* timer) {
  auto* self = static_cast<ProcessManager*>(timer->data);
  uint64_t now = uv_now(self->loop_);
  bool waiting = false;
  for (int i = 0; i < self->size(); ++i) {
    Child* c = self->children_[i].get();
    if (c->finished) continue;
    if (c->exited) {
      if (now - c->exit_ms >= ToMs(self->options_.drain_seconds)) {
        self->MaybeFinish(c, true);
      } else {
        waiting = true;
      }
    } else if (c->sigkill_ms != 0) {
      if (now - c->sigkill_ms >= ToMs(self->options_.kill_wait_seconds)) {
        c->exit.abandoned = true;
        c->exit.signalled_by_us = true;
        self->MaybeFinish(c, true);
      } else {
        waiting = true;
      }
    }
  }
  if (!waiting) uv_timer_stop(&self->drain_timer_);
}

void ProcessManager::CloseHandle(uv_handle_t* handle) {
  if (uv_is_closing(handle)) return;
  ++open_handles_;
  handle->data = this;
  uv_close(handle, OnHandleClosed);
}

void ProcessManager::OnHandleClosed(uv_handle_t* handle) {
  static_cast<ProcessManager*>(handle->data)->open_handles_--;
}

}  // namespace geops::supervisor
