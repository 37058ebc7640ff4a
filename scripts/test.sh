#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine, builds geops, runs a fixed count of
# libFuzzer inputs on each fuzz target, then every test.
# GPU tests (CTest label `gpu`) skip with a message when no GPU is present.
# Prints the CTest totals; exits non-zero if any test fails. Safe to re-run.
#
# Before the tests it checks that scripts/setup.sh installs every system
# package the build used (../shared/tools/check-setup-deps, when the shared
# folder sits next to this repository), so a missing install step fails here
# even on a machine where the package happens to be installed already.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
checker=../shared/tools/check-setup-deps
if [ -x "$checker" ]; then
  "$checker" build scripts/setup.sh
else
  echo "test: $checker not found; skipping the setup-dependency check"
fi
# libFuzzer (Clang, with sanitizers) on the WAN batch decoder and on Thrift
# frames, a fixed count of inputs each (experiments/run_fuzz.sh); the
# GCC build's replay of the same targets is part of the CTest run below.
bash experiments/run_fuzz.sh --runs "${GEOPS_FUZZ_RUNS:-200000}"
cd build
ctest --output-on-failure --timeout 900 -j "${GEOPS_TEST_JOBS:-2}" "$@"
