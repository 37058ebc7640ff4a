// DeviceTableSource: where the CUDA backend finds the parameter tables of a
// step in device memory, and where it leaves their updates.
//
// The backend asks for a table right before the work that reads it and hands
// it back right after, so a source may upload tables lazily (the upload of
// layer i+1 runs while layer i computes), keep only some tables resident and
// stream the others through a few device slots, and download each update as
// soon as it is complete (the download of layer i's update runs while layer
// i-1's gradient computes). Ordering across streams is the source's job: it
// makes the backend's stream wait (events) for the copies it issues, and
// makes its own copies wait for the backend's work it is told about.
//
// Per step, for each table t the backend calls, in stream order:
//   Acquire(t) ... work reading it ... Release(t)     (forward, and again in
//                                                      backward for weights)
//   DeltaBuffer(t) ... work writing the update ... DeltaDone(t)   (once)
// A table is acquired at most once at a time; a delta buffer is written only
// between its DeltaBuffer and DeltaDone. Tables are numbered as in the
// ModelSpec of the MLP (weight, bias per layer), each dense row-major.
//
// Thread-safety: a source serves one step at a time, from one thread.
#ifndef GEOPS_WORKER_CUDA_DEVICE_TABLES_H_
#define GEOPS_WORKER_CUDA_DEVICE_TABLES_H_

#include <cuda_runtime_api.h>

#include "common/status.h"

namespace geops::worker::cuda {

class DeviceTableSource {
 public:
  virtual ~DeviceTableSource() = default;

  // Device pointer to table `t`, valid for work enqueued on `stream` after
  // this call until Release(t). May enqueue an upload and make `stream` wait
  // for it; may block the host briefly to stage host values. Errors:
  // InvalidArgument when the table's host values are not finite (naming the
  // table and element), ResourceExhausted / Internal from CUDA.
  virtual Result<const float*> Acquire(int t, cudaStream_t stream) = 0;
  // Work enqueued on `stream` so far is the last to read the pointer that
  // Acquire(t) returned.
  virtual Status Release(int t, cudaStream_t stream) = 0;

  // Device buffer for the update of table `t`, writable by work enqueued on
  // `stream` after this call until DeltaDone(t).
  virtual Result<float*> DeltaBuffer(int t, cudaStream_t stream) = 0;
  // The update of table `t` is complete once the work enqueued on `stream`
  // so far has run.
  virtual Status DeltaDone(int t, cudaStream_t stream) = 0;
};

}  // namespace geops::worker::cuda

#endif  // GEOPS_WORKER_CUDA_DEVICE_TABLES_H_
