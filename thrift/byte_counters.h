// ByteCounters: the exact bytes a set of sockets moved, per direction
// (CountingSocket and TlsSocket update them; servers and clients report
// them). Free of Thrift types, so that headers exposing the counts need not
// include Thrift.
//
// Thread-safety: atomics; read from any thread while sockets update them.
#ifndef GEOPS_THRIFT_BYTE_COUNTERS_H_
#define GEOPS_THRIFT_BYTE_COUNTERS_H_

#include <atomic>
#include <cstdint>

namespace geops::rpc {

struct ByteCounters {
  std::atomic<int64_t> sent{0};
  std::atomic<int64_t> received{0};
};

}  // namespace geops::rpc

#endif  // GEOPS_THRIFT_BYTE_COUNTERS_H_
