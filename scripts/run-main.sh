#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine, builds geops and runs the main job: the
# default topology, trained on this machine. Results land in ./out/main
# (summary.json, metrics/, logs/); a re-run replaces the previous one.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh geops   # only what the main job runs; scripts/test.sh builds the rest
out=${1:-out/main}
./build/cli/geops launch experiments/topologies/default.toml --out "$out" --replace
echo "summary: $out/summary.json"
