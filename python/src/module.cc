// geops._geops: the compiled half of the Python package `geops`. The
// package (python/geops/) wraps it; users do not import it directly.
#include <pybind11/pybind11.h>

#include "python/src/bindings.h"
#include "python/src/status_error.h"

PYBIND11_MODULE(_geops, m) {
  m.doc() = "geops parameter-server client (internal; use the geops package)";
  geops::python::RegisterStatusErrors(m);
  geops::python::RegisterTopology(m);
  geops::python::RegisterClient(m);
}
