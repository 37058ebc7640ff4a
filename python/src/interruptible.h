// RunInterruptible: runs a blocking geops call without the GIL, while the
// calling Python thread keeps answering signals (Ctrl-C).
//
// The call runs on a helper thread that blocks SIGINT and SIGTERM (so do the
// threads it starts, e.g. PsClient's heartbeat thread), which leaves the
// signals to Python's main thread. The caller waits in short steps; after
// each it takes the GIL and runs PyErr_CheckSignals. When a handler raises
// (KeyboardInterrupt), it raises `flag` so the call returns Cancelled within
// about one CancellableConnectionFactory::kSliceMs, waits for it, clears the
// flag and rethrows the Python exception: the client stays usable.
//
// REQUIRES: the GIL is held on entry; it is held again on return or throw.
#ifndef GEOPS_PYTHON_SRC_INTERRUPTIBLE_H_
#define GEOPS_PYTHON_SRC_INTERRUPTIBLE_H_

#include <functional>

#include "common/status.h"
#include "python/src/cancellable_connection.h"

namespace geops::python {

// Returns what `call` returned; throws pybind11::error_already_set when a
// signal handler raised while it ran.
Status RunInterruptible(CancelFlag* flag, const std::function<Status()>& call);

}  // namespace geops::python

#endif  // GEOPS_PYTHON_SRC_INTERRUPTIBLE_H_
