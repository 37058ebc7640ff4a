#include "python/src/interruptible.h"

#include <pthread.h>

#include <chrono>
#include <csignal>
#include <future>
#include <thread>

#include <pybind11/pybind11.h>

namespace py = pybind11;

namespace geops::python {
namespace {

// How often the waiting thread looks for signals.
constexpr auto kPollInterval = std::chrono::milliseconds(50);

void BlockStopSignals() {
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
}

}  // namespace

Status RunInterruptible(CancelFlag* flag, const std::function<Status()>& call) {
  std::promise<Status> done;
  std::future<Status> result = done.get_future();
  bool interrupted = false;
  {
    py::gil_scoped_release release;
    std::thread helper([&] {
      BlockStopSignals();
      done.set_value(call());
    });
    while (result.wait_for(kPollInterval) != std::future_status::ready) {
      py::gil_scoped_acquire acquire;
      if (PyErr_CheckSignals() != 0) {
        // The Python error stays set (on this thread) while we wait below.
        interrupted = true;
        flag->Raise();
        break;
      }
    }
    result.wait();
    helper.join();
    flag->Clear();
  }
  if (interrupted) throw py::error_already_set();
  return result.get();
}

}  // namespace geops::python
