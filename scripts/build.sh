#!/usr/bin/env bash
# Configures and builds geops into ./build (Release-with-debug-info, Ninja).
# CUDA parts are built when a CUDA compiler is found. Safe to re-run.
#
#   bash scripts/build.sh              everything: geops, tests, benchmarks
#   bash scripts/build.sh geops        only the named targets (ninja targets)
#
# Extra CMake settings go in GEOPS_CMAKE_ARGS, e.g.
#   GEOPS_CMAKE_ARGS="-DGEOPS_ENABLE_CUDA=OFF" bash scripts/build.sh
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${GEOPS_BUILD_JOBS:-$(nproc)}
# shellcheck disable=SC2086
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo ${GEOPS_CMAKE_ARGS:-} > build-configure.log 2>&1 || {
  cat build-configure.log; exit 1; }
grep -E "geops: CUDA backend" build-configure.log || true
rm -f build-configure.log
ninja -C build -j "$jobs" "$@"
