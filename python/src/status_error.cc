#include "python/src/status_error.h"

#include <string_view>

namespace py = pybind11;

namespace geops::python {
namespace {

constexpr StatusCode kErrorCodes[] = {
    StatusCode::kCancelled,         StatusCode::kUnknown,       StatusCode::kInvalidArgument,
    StatusCode::kDeadlineExceeded,  StatusCode::kNotFound,      StatusCode::kAlreadyExists,
    StatusCode::kResourceExhausted, StatusCode::kFailedPrecondition, StatusCode::kAborted,
    StatusCode::kOutOfRange,        StatusCode::kUnimplemented, StatusCode::kInternal,
    StatusCode::kUnavailable,       StatusCode::kDataLoss,      StatusCode::kPermissionDenied,
};

void SetPythonError(const Status& status) {
  // geops.errors is imported by the package before the extension is used.
  py::object make = py::module_::import("geops.errors").attr("_from_status");
  py::object error = make(std::string(StatusCodeName(status.code())), status.message());
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(error.ptr())), error.ptr());
}

}  // namespace

void RegisterStatusErrors(py::module_& m) {
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const StatusError& e) {
      SetPythonError(e.status());
    }
  });
  m.def(
      "status_code_names",
      [] {
        py::list names;
        for (StatusCode c : kErrorCodes) names.append(std::string(StatusCodeName(c)));
        return names;
      },
      "Names of the geops status codes that are errors, e.g. 'INVALID_ARGUMENT'.");
}

}  // namespace geops::python
