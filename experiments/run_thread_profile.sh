#!/usr/bin/env bash
# Where a launch's CPU goes, by thread: runs each topology once under
# `perf record -a` (every CPU, 400 samples a second) and prints one
# markdown table with the share of the machine's CPU time each group of
# threads took over the run: the workers' computation (the main thread of
# a worker process, named geops), the shards' RPC work (ps-*), the WAN
# layer (wan-replicator, mirror-*, wan-shaper, lane-*), other threads, and
# idle (no thread ran); and the megabytes a worker received from its
# shards over the run (reads), as a median over the workers. All the sites
# of a launch share this machine's cores, so what the WAN layer takes here
# is time the workers do not get.
#
# Usage: bash experiments/run_thread_profile.sh TOPOLOGY [TOPOLOGY ...]
# Environment: GEOPS (default build/cli/geops), TIMEOUT (seconds per run,
#   default 600). Needs perf (Debian: linux-perf) and the right to sample
#   every CPU (root, or kernel.perf_event_paranoid <= 0).
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { echo "usage: run_thread_profile.sh TOPOLOGY [TOPOLOGY ...]" >&2; exit 2; }
command -v perf > /dev/null || { echo "perf not found: apt-get install linux-perf" >&2; exit 2; }
geops=${GEOPS:-build/cli/geops}
timeout=${TIMEOUT:-600}
work=$(mktemp -d)
copies=()
trap 'rm -rf "$work" "${copies[@]}"' EXIT
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "geops: $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':!experiments/results' || echo +local changes)"
echo
echo "| run | wall s | workers' computation | shards' RPC (ps-*) | wan-replicator | mirror-* | wan-shaper, lane-* | other | idle | MB read a worker |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for topo in "$@"; do
  [ -f "$topo" ] || { echo "no topology $topo" >&2; exit 2; }
  name=$(basename "$topo" .toml)
  # A copy beside the original, so that relative trace folders stay valid.
  copy=$(dirname "$topo")/.profile.$$.$name.toml
  copies+=("$copy")
  cp "$topo" "$copy"
  start=$(date +%s.%N)
  perf record -a -F 400 -o "$work/$name.data" -- \
    "$geops" launch "$copy" --out "$work/$name" --replace --plain --timeout "$timeout" > "$work/$name.log" 2>&1 \
    || { echo "$name failed; its log:" >&2; tail -20 "$work/$name.log" >&2; exit 1; }
  wall=$(python3 -c "import sys; print(float(sys.argv[2]) - float(sys.argv[1]))" "$start" "$(date +%s.%N)")
  perf report -i "$work/$name.data" --no-children --sort comm --stdio 2> /dev/null | python3 -c '
import json, statistics
import re, sys
groups = {"geops": 0, "ps": 0, "rep": 0, "mirror": 0, "link": 0, "other": 0, "idle": 0}
for line in sys.stdin:
    m = re.match(r"\s*([\d.]+)%\s+(\S.*?)\s*$", line)
    if not m:
        continue
    share, comm = float(m.group(1)), m.group(2)
    if comm == "geops":
        groups["geops"] += share
    elif comm.startswith("ps-"):
        groups["ps"] += share
    elif comm == "wan-replicator":
        groups["rep"] += share
    elif comm.startswith("mirror-"):
        groups["mirror"] += share
    elif comm == "wan-shaper" or comm.startswith("lane-"):
        groups["link"] += share
    elif comm == "swapper":
        groups["idle"] += share
    else:
        groups["other"] += share
name, wall = sys.argv[1], float(sys.argv[2])
with open(sys.argv[3]) as f:
    workers = json.load(f).get("per_worker") or []
got = [w["lan_bytes_received"] / 1e6 for w in workers if w.get("lan_bytes_received") is not None]
cells = " | ".join("%.1f%%" % groups[k] for k in ("geops", "ps", "rep", "mirror", "link", "other", "idle"))
print("| %s | %.1f | %s | %s |" % (name, wall, cells, "%.0f" % statistics.median(got) if got else "-"))
' "$name" "$wall" "$work/$name/summary.json"
done
