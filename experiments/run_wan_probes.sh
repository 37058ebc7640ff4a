#!/usr/bin/env bash
# Where the harsh scenario's ASP loses clocks against its LAN baseline.
#
# run_wan_comparison.sh measures the modes; this script asks why asp needs
# more clocks than the LAN run to reach the target on the harsh scenario.
# Each probe is the committed harsh topology of one mode
# (experiments/results/wan/harsh/topologies/) with one or two settings
# changed, launched alone, one after the other. It records, per probe,
# the accuracy at every evaluation (every 50 clocks), the clock and time of
# the first one at or above the target, the final accuracy at the lowest
# site, the WAN bytes and how often a worker read from its shard instead of
# its SSP cache.
#
# Writes experiments/results/wan/probes/: README.md (the table, command,
# date, machine) and topologies/ (each probe's topology). The launch
# folders go to a temporary directory and are removed.
#
# Usage: bash experiments/run_wan_probes.sh [probe ...]   (default: all)
# Environment: GEOPS (default build/cli/geops), TIMEOUT (seconds per run,
#   default 600).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
geops=${GEOPS:-build/cli/geops}
timeout=${TIMEOUT:-600}
src=experiments/results/wan/harsh/topologies
results=experiments/results/wan/probes
topos=$results/topologies
runs=$(mktemp -d)
trap 'rm -rf "$runs"' EXIT

# probe -> base topology and the sed expressions that make it.
declare -A base edits what
add() { base[$1]=$2; edits[$1]=$3; what[$1]=$4; order+=("$1"); }
order=()
fp16='s/^codec = .*/codec = "fp16"/'
t01='s/^threshold = .*/threshold = 0.01/;s/^threshold_floor = .*/threshold_floor = 0.01/'
c200='s/^clocks = .*/clocks = 200/'
add lan lan "" "LAN baseline: 1 site x 5 workers, SSP s 2"
add asp asp "" "asp as committed: int4, threshold 0.05, DS 8 + allowance, SSP s 2"
add asp-fp16 asp "$fp16" "asp with fp16 values instead of int4"
add asp-fp16-t01 asp "$fp16;$t01" "asp, fp16, threshold 0.01 (5x lower)"
add asp-s0 asp 's/^staleness = .*/staleness = 0/' "asp, SSP s 0 (a worker reads its shard every clock)"
add nolinks-ds2 asp-nolinks "$fp16;$t01;s/^staleness_ds = .*/staleness_ds = 2/;s/^\[wan\]/[wan]\nmax_drift_allowance = 0/" \
  "asp, every link 1000 Mbit/s 1 ms, fp16, threshold 0.01, DS 2, no allowance"
add lan-200 lan "$c200" "LAN, 200 clocks, SSP s 2"
add lan-200-s0 lan "$c200;s/^staleness = .*/staleness = 0/" "LAN, 200 clocks, SSP s 0"
add bsp-200 asp-nolinks "$c200;s/^mode = .*/mode = \"bsp\"/;s/^codec = .*/codec = \"fp32\"/" \
  "bsp, links 1000 Mbit/s 1 ms, 200 clocks, SSP s 2"
add bsp-200-s0 asp-nolinks "$c200;s/^mode = .*/mode = \"bsp\"/;s/^codec = .*/codec = \"fp32\"/;s/^staleness = .*/staleness = 0/" \
  "bsp, links 1000 Mbit/s 1 ms, 200 clocks, SSP s 0"

selected=("$@")
[ ${#selected[@]} -eq 0 ] && selected=("${order[@]}")
for p in "${selected[@]}"; do
  [ -n "${base[$p]:-}" ] || { echo "unknown probe '$p'; probes: ${order[*]}" >&2; exit 2; }
done

rm -rf "$results"
mkdir -p "$topos"
for p in "${selected[@]}"; do
  t=$topos/$p.toml
  sed -e "0,/^name = .*/s//name = \"probe-$p\"/" "$src/${base[$p]}.toml" > "$t"
  [ -n "${edits[$p]}" ] && sed -i -e "${edits[$p]}" "$t"
  echo "=== $p ($(date -u +%H:%M:%S))"
  "$geops" launch "$t" --out "$runs/$p" --plain --timeout "$timeout" > "$runs/$p.log" 2>&1 \
    || echo "probe $p exited with $?" >&2
  printf '%s\n' "${what[$p]}" > "$runs/$p/what.txt"
done

{
  echo "# Probes: where harsh ASP loses clocks against its LAN baseline"
  echo
  echo "command: bash experiments/run_wan_probes.sh $*"
  echo "finished: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -sr)"
  echo "geops: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo '+local changes')"
  echo
  python3 experiments/wan_probes_table.py "$runs" "${selected[@]}"
} > "$results/README.md"
sed -i "s|$root/||g" "$results/README.md"
echo "results: $results/README.md"
