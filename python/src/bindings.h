// The parts of the extension module geops._geops, one per binding area.
// module.cc calls each once, at import.
#ifndef GEOPS_PYTHON_SRC_BINDINGS_H_
#define GEOPS_PYTHON_SRC_BINDINGS_H_

#include <pybind11/pybind11.h>

namespace geops::python {

// python/src/topology_binding.cc: load_topology().
void RegisterTopology(pybind11::module_& m);
// python/src/client_binding.cc: class Client.
void RegisterClient(pybind11::module_& m);

}  // namespace geops::python

#endif  // GEOPS_PYTHON_SRC_BINDINGS_H_
