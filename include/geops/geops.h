// The geops C++ client library in one include: connect to a geops site as
// one of its workers and train the application's own model through it.
// See docs/cpp_client.md.
#ifndef GEOPS_CLIENT_GEOPS_H_
#define GEOPS_CLIENT_GEOPS_H_

#include "geops/client.h"   // IWYU pragma: export
#include "geops/error.h"    // IWYU pragma: export
#include "geops/options.h"  // IWYU pragma: export

#endif  // GEOPS_CLIENT_GEOPS_H_
