// How a geops Status reaches Python: as an instance of the exception class
// of its code (geops.InvalidArgumentError, geops.UnavailableError, ...; see
// geops/errors.py), carrying the Status message.
//
// C++ code in the bindings calls ThrowIfError(status); the translator that
// RegisterStatusErrors installs turns the StatusError into the Python class.
#ifndef GEOPS_PYTHON_SRC_STATUS_ERROR_H_
#define GEOPS_PYTHON_SRC_STATUS_ERROR_H_

#include <exception>
#include <string>
#include <utility>

#include <pybind11/pybind11.h>

#include "common/status.h"

namespace geops::python {

class StatusError : public std::exception {
 public:
  explicit StatusError(Status status) : status_(std::move(status)), what_(status_.ToString()) {}
  const Status& status() const { return status_; }
  const char* what() const noexcept override { return what_.c_str(); }

 private:
  Status status_;
  std::string what_;
};

// Throws StatusError when `status` is not OK.
inline void ThrowIfError(const Status& status) {
  if (!status.ok()) throw StatusError(status);
}

template <typename T>
T ValueOrThrow(Result<T> result) {
  ThrowIfError(result.status());
  return std::move(result).value();
}

// Installs the translator and adds `status_code_names()` to `m` (the code
// names geops/errors.py maps to classes, so the two lists cannot drift).
void RegisterStatusErrors(pybind11::module_& m);

}  // namespace geops::python

#endif  // GEOPS_PYTHON_SRC_STATUS_ERROR_H_
