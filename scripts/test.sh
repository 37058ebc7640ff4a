#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine, builds geops and runs every test.
# GPU tests (CTest label `gpu`) skip with a message when no GPU is present.
# Prints the CTest totals; exits non-zero if any test fails. Safe to re-run.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
cd build
ctest --output-on-failure --timeout 900 -j "${GEOPS_TEST_JOBS:-2}" "$@"
