// Copies into memory that is not about to be read again, without first
// reading it: non-temporal ("streaming") stores.
//
// An ordinary store to a line that is not in the CPU's caches first reads
// the line from memory (read for ownership), so copying n bytes into a cold
// buffer moves 2n bytes of destination traffic. A pull that writes a model
// larger than the caches into a second buffer (a framework's parameter
// tensors, next to the client's cache) pays that twice over; streaming
// stores write the lines whole and leave the caches to the cache's copy.
//
// Thread-safety: pure functions; the caller guards the memory they touch.
#ifndef GEOPS_WORKER_STREAM_COPY_H_
#define GEOPS_WORKER_STREAM_COPY_H_

#include <cstdint>

namespace geops::worker {

// dst[i] = src[i] for i in [0, n), dst written with streaming stores where
// the CPU has them (x86 SSE2; a plain copy elsewhere). The stores are only
// ordered against later loads and stores of other threads after
// StreamFence(): call it once after a series of copies, before the buffer
// is handed to anyone else. REQUIRES: the ranges do not overlap.
void StreamCopy(float* __restrict dst, const float* __restrict src, int64_t n);

// Orders every earlier StreamCopy before what follows (sfence on x86).
void StreamFence();

}  // namespace geops::worker

#endif  // GEOPS_WORKER_STREAM_COPY_H_
