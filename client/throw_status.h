// Between the core's Status values (common/status.h: the core never throws)
// and the exceptions of the public API (include/geops/error.h). Only the
// library's own sources include this.
#ifndef GEOPS_CLIENT_THROW_STATUS_H_
#define GEOPS_CLIENT_THROW_STATUS_H_

#include <utility>

#include "common/status.h"
#include "geops/error.h"

namespace geops::client {

// Throws Error with the status' code and message unless it is OK.
void ThrowIfError(const Status& status);

// The value of `result`, or throws its error.
template <typename T>
T ValueOrThrow(Result<T> result) {
  ThrowIfError(result.status());
  return std::move(result).value();
}

}  // namespace geops::client

#endif  // GEOPS_CLIENT_THROW_STATUS_H_
