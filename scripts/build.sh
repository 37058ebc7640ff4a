#!/usr/bin/env bash
# Configures and builds geops into ./build (Release-with-debug-info, Ninja).
# CUDA parts are built when a CUDA compiler is found. Safe to re-run.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${GEOPS_BUILD_JOBS:-$(nproc)}
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" > build-configure.log 2>&1 || {
  cat build-configure.log; exit 1; }
grep -E "geops: CUDA backend" build-configure.log || true
rm -f build-configure.log
ninja -C build -j "$jobs"
