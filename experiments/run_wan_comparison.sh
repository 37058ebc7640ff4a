#!/usr/bin/env bash
# Runs the WAN comparison: the default topology's model and training under
#   lan        all six workers in one site (experiments/topologies/lan.toml)
#   bsp        three sites, every update every clock, global barrier
#   all-async  three sites, every update every clock, no barrier
#   asp        three sites, significant updates only (the default topology)
#   avg        three sites, the sites' models averaged every 10 clocks
#   diloco     three sites, DiLoCo: every 50 clocks each site's progress
#              (4-bit, error feedback) goes to every other, and every site
#              applies the same outer step (lr 0.7, Nesterov momentum 0.9)
#   diloco-int8  the same every 20 clocks with 8-bit values
#   asp-int8   asp with 8-bit values instead of 4-bit
#   asp-sign   asp with 1-bit sign values instead of 4-bit
# over the default links (Skyplane, static), and asp and bsp again with each
# link's bandwidth varying over time like a Mahimahi cellular trace scaled to
# the link's mean. Writes under experiments/results/wan/: one launch folder
# per run, results.md (table, ratios, command, date, machine) and PNGs
# (accuracy vs wall time, WAN bytes per link, barrier wait) made by
# experiments/plot_wan.py (python3-matplotlib).
#
# Usage: bash experiments/run_wan_comparison.sh [RUN ...]
#   RUN: lan bsp all-async asp avg diloco diloco-int8 asp-int8 asp-sign asp-mahimahi bsp-mahimahi
#        (default: all)
# Environment: GEOPS (the geops binary; default build/cli/geops),
#   GEOPS_TRACES (the shared trace folder; default ../shared/traces next to
#   the repository), EVAL_EVERY (default 50), TIMEOUT (seconds per run),
#   PYTHON (an interpreter with matplotlib; default python3).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
geops=${GEOPS:-build/cli/geops}
traces=${GEOPS_TRACES:-$root/../shared/traces}
eval_every=${EVAL_EVERY:-50}
timeout=${TIMEOUT:-1500}
results=experiments/results/wan
topos=$results/topologies
mkdir -p "$topos"
runs=("$@")
[ ${#runs[@]} -eq 0 ] && runs=(lan bsp all-async asp avg diloco diloco-int8 asp-int8 asp-sign asp-mahimahi bsp-mahimahi)
mahimahi="$traces/mahimahi-cellular/TMobile-LTE-driving.down"

# Writes the topology of run $1 to $topos/$1.toml. Paths inside stay
# relative to that file's folder.
make_topology() {
  local run=$1 out=$topos/$1.toml base mode
  case $run in
    lan) base=experiments/topologies/lan.toml ;;
    *) base=experiments/topologies/default.toml ;;
  esac
  mode=${run%-mahimahi}
  mode=${mode%-sign}
  mode=${mode%-int8}
  sed -e "0,/^name = .*/s//name = \"$run\"/" \
      -e "s/^eval_every = .*/eval_every = $eval_every/" \
      -e "s|^trace_dir = .*|trace_dir = \"$(realpath --relative-to="$topos" experiments/traces/skyplane-aws3)\"|" \
      -e "s/^mode = .*/mode = \"$mode\"/" \
      "$base" > "$out"
  if [[ $run == *-sign ]]; then sed -i 's/^codec = .*/codec = "sign"/' "$out"; fi
  if [[ $run == *-int8 ]]; then sed -i 's/^codec = .*/codec = "int8"/' "$out"; fi
  if [[ $run == diloco ]]; then sed -i 's/^\[wan\]/[wan]\naveraging_period = 50/' "$out"; fi
  if [[ $run == diloco-int8 ]]; then sed -i 's/^\[wan\]/[wan]\naveraging_period = 20/' "$out"; fi
  if [[ $run == *-mahimahi ]]; then
    if [ ! -f "$mahimahi" ]; then
      echo "skipping $run: no $mahimahi (set GEOPS_TRACES)" >&2
      rm -f "$out"
      return 1
    fi
    sed -i "s|^time_scale = .*|variation = \"$(realpath --relative-to="$topos" "$mahimahi")\"\nvariation_bin_s = 0.5\ntime_scale = 1.0|" "$out"
  fi
}

for run in "${runs[@]}"; do
  make_topology "$run" || continue
  echo "=== $run ($(date -u +%H:%M:%S))"
  rm -rf "$results/$run"
  "$geops" launch "$topos/$run.toml" --out "$results/$run" --plain --timeout "$timeout" \
    > "$results/$run.log" 2>&1 || echo "run $run exited with $?" >&2
  sed -i "s|$root/||g" "$results/$run.log"  # paths relative to the repository
  tail -n 6 "$results/$run.log"
done

# One block per invocation: a partial re-run keeps the record of the runs
# it did not repeat.
{
  echo "runs: ${runs[*]}"
  echo "command: bash experiments/run_wan_comparison.sh ${*:-}"
  echo "finished: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -sr)"
  echo "geops: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo '+local changes')"
  echo
} >> "$results/run_info.txt"
python=${PYTHON:-python3}
if ! "$python" -c 'import matplotlib' 2>/dev/null && [ -x /usr/bin/python3 ]; then python=/usr/bin/python3; fi
"$python" experiments/plot_wan.py "$results"
echo "results: $results/results.md"
