#include "supervisor/launch/process_manager.h"

#include <signal.h>
#include <uv.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace geops::supervisor {
namespace {

// Runs shell snippets under a ProcessManager on a private loop, recording
// what the callbacks saw, with a watchdog so no test can hang.
class ProcessManagerTest : public ::testing::Test {
 protected:
  struct Seen {
    std::vector<std::string> out, err;
    std::vector<std::string> order;  // "line:<text>" and "exit" events in order
    bool exited = false;
    ProcessExit exit;
  };

  void SetUp() override {
    uv_loop_init(&loop_);
    uv_timer_init(&loop_, &watchdog_);
    watchdog_.data = this;
    dir_ = ::testing::TempDir() + "pm_test_" + std::to_string(::getpid()) + "_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    uv_loop_close(&loop_);
    std::filesystem::remove_all(dir_);
  }

  void Make(ProcessManagerOptions options = {}) {
    pm_ = std::make_unique<ProcessManager>(&loop_, options);
    pm_->set_line_callback([this](int id, OutputStream s, std::string_view line) {
      Seen& seen = seen_[static_cast<size_t>(id)];
      (s == OutputStream::kStdout ? seen.out : seen.err).emplace_back(line);
      seen.order.push_back("line:" + std::string(line));
      if (on_line_) on_line_(id, line);
    });
    pm_->set_exit_callback([this](int id, const ProcessExit& e) {
      Seen& seen = seen_[static_cast<size_t>(id)];
      seen.exited = true;
      seen.exit = e;
      seen.order.push_back("exit");
      if (pm_->live_count() == 0 && close_when_idle_) Finish();
    });
  }

  int Spawn(const std::string& script, const std::string& log = "") {
    Result<int> id = pm_->Spawn(ProcessSpec{"sh-" + std::to_string(seen_.size()), {"/bin/sh", "-c", script}, log});
    EXPECT_TRUE(id.ok()) << id.status().ToString();
    seen_.resize(seen_.size() + 1);
    return id.ok() ? *id : -1;
  }

  // Runs the loop until Finish() (or the watchdog, which fails the test).
  double RunLoop(double limit_seconds = 10) {
    uv_timer_start(&watchdog_, [](uv_timer_t* t) {
      auto* self = static_cast<ProcessManagerTest*>(t->data);
      ADD_FAILURE() << "watchdog fired";
      self->pm_->KillAll();
      self->Finish();
    }, static_cast<uint64_t>(limit_seconds * 1000), 0);
    auto start = std::chrono::steady_clock::now();
    uv_run(&loop_, UV_RUN_DEFAULT);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }

  void Finish() {
    if (finished_) return;
    finished_ = true;
    pm_->Close();
    uv_close(reinterpret_cast<uv_handle_t*>(&watchdog_), nullptr);
  }

  uv_loop_t loop_;
  uv_timer_t watchdog_;
  std::unique_ptr<ProcessManager> pm_;
  std::vector<Seen> seen_;
  std::function<void(int, std::string_view)> on_line_;
  bool close_when_idle_ = true;
  bool finished_ = false;
  std::string dir_;
};

TEST_F(ProcessManagerTest, SplitsLinesAcrossWritesAndKeepsThePartialLastLine) {
  Make();
  std::string log = dir_ + "/child.log";
  int id = Spawn("printf 'one\\ntw'; sleep 0.1; printf 'o\\r\\nthree'; echo oops >&2", log);
  RunLoop();
  ASSERT_TRUE(seen_[id].exited);
  EXPECT_EQ(seen_[id].out, (std::vector<std::string>{"one", "two", "three"}));
  EXPECT_EQ(seen_[id].err, (std::vector<std::string>{"oops"}));
  std::ifstream in(log);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_NE(text.str().find("one\ntwo\n"), std::string::npos);
  EXPECT_NE(text.str().find("three\n"), std::string::npos);
  EXPECT_NE(text.str().find("oops\n"), std::string::npos);
}

TEST_F(ProcessManagerTest, ReportsExitCodeOnlyAfterEveryLine) {
  Make();
  int id = Spawn("i=0; while [ $i -lt 200 ]; do echo line$i; i=$((i+1)); done; exit 7");
  RunLoop();
  ASSERT_TRUE(seen_[id].exited);
  EXPECT_EQ(seen_[id].exit.exit_status, 7);
  EXPECT_EQ(seen_[id].exit.term_signal, 0);
  EXPECT_FALSE(seen_[id].exit.clean());
  EXPECT_EQ(seen_[id].exit.Describe(), "exit code 7");
  ASSERT_EQ(seen_[id].out.size(), 200u);
  EXPECT_EQ(seen_[id].order.back(), "exit");
  EXPECT_EQ(seen_[id].order[199], "line:line199");
}

TEST_F(ProcessManagerTest, ReportsDeathBySignalItDidNotSend) {
  Make();
  int id = Spawn("kill -9 $$");
  RunLoop();
  ASSERT_TRUE(seen_[id].exited);
  EXPECT_EQ(seen_[id].exit.term_signal, SIGKILL);
  EXPECT_FALSE(seen_[id].exit.signalled_by_us);
}

TEST_F(ProcessManagerTest, StopAllEndsCooperativeChildrenWithoutWaitingForTheGrace) {
  Make();
  close_when_idle_ = false;
  int ready = 0;
  Spawn("trap 'echo bye; exit 0' TERM; echo ready; while :; do sleep 0.02; done");
  Spawn("trap 'exit 0' TERM; echo ready; while :; do sleep 0.02; done");
  bool done = false;
  on_line_ = [&](int, std::string_view line) {
    if (line == "ready" && ++ready == 2) pm_->StopAll(5.0, [&] { done = true; Finish(); });
  };
  double took = RunLoop();
  EXPECT_TRUE(done);
  EXPECT_LT(took, 2.0);
  for (const Seen& s : seen_) {
    EXPECT_TRUE(s.exit.clean()) << s.exit.Describe();
    EXPECT_TRUE(s.exit.signalled_by_us);
  }
  EXPECT_EQ(seen_[0].out.back(), "bye");
}

TEST_F(ProcessManagerTest, StopAllKillsAChildThatIgnoresSigtermAfterTheGrace) {
  Make();
  close_when_idle_ = false;
  int id = Spawn("trap '' TERM; echo ready; while :; do sleep 0.02; done");
  int pid = pm_->pid(id);
  ASSERT_GT(pid, 0);
  on_line_ = [&](int, std::string_view line) {
    if (line == "ready") pm_->StopAll(0.3, [&] { Finish(); });
  };
  double took = RunLoop();
  ASSERT_TRUE(seen_[id].exited);
  EXPECT_EQ(seen_[id].exit.term_signal, SIGKILL);
  EXPECT_TRUE(seen_[id].exit.signalled_by_us);
  EXPECT_GE(took, 0.3);
  EXPECT_LT(took, 3.0);
  EXPECT_EQ(::kill(pid, 0), -1);  // reaped: the PID is gone
  EXPECT_EQ(errno, ESRCH);
}

TEST_F(ProcessManagerTest, GrandchildHoldingThePipeDoesNotDelayTheExitPastTheDrain) {
  ProcessManagerOptions o;
  o.drain_seconds = 0.2;
  Make(o);
  int id = Spawn("sleep 2 & echo started; exit 4");
  double took = RunLoop();
  ASSERT_TRUE(seen_[id].exited);
  EXPECT_EQ(seen_[id].exit.exit_status, 4);
  EXPECT_EQ(seen_[id].out, (std::vector<std::string>{"started"}));
  EXPECT_LT(took, 1.5);
}

TEST_F(ProcessManagerTest, TailKeepsTheLastLinesWithoutEventLines) {
  ProcessManagerOptions o;
  o.tail_lines = 3;
  o.tail_exclude_prefix = "@geops ";
  Make(o);
  int id = Spawn("echo a; echo b; echo c; echo '@geops {}'; echo d >&2; echo '@geops {}'");
  RunLoop();
  EXPECT_EQ(pm_->Tail(id), (std::vector<std::string>{"b", "c", "d"}));
}

TEST_F(ProcessManagerTest, SpawnOfAMissingProgramFailsWithoutCallbacks) {
  Make();
  Result<int> id = pm_->Spawn(ProcessSpec{"ghost", {dir_ + "/no-such-program"}, ""});
  EXPECT_FALSE(id.ok());
  EXPECT_EQ(id.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(id.status().message().find("ghost"), std::string::npos);
  EXPECT_EQ(pm_->live_count(), 0);
  Finish();
  uv_run(&loop_, UV_RUN_DEFAULT);
}

TEST_F(ProcessManagerTest, UnwritableLogIsAnError) {
  Make();
  Result<int> id = pm_->Spawn(ProcessSpec{"x", {"/bin/true"}, dir_ + "/missing-dir/x.log"});
  EXPECT_FALSE(id.ok());
  Finish();
  uv_run(&loop_, UV_RUN_DEFAULT);
}

TEST_F(ProcessManagerTest, StopAllWithNothingRunningCompletesAtOnce) {
  Make();
  bool done = false;
  pm_->StopAll(1.0, [&] { done = true; });
  EXPECT_TRUE(done);
  Finish();
  uv_run(&loop_, UV_RUN_DEFAULT);
}

}  // namespace
}  // namespace geops::supervisor
