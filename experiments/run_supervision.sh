#!/usr/bin/env bash
# A failure stays where it happened: the Fashion-MNIST CNN of
# examples/fashion_mnist_cnn through three sites with [storage], once
# untouched and once with eu-west-1's worker killed (SIGKILL, from outside,
# by this script) when it reports clock KILL_AT. geops launch restarts it
# while the other sites train on. Pairs alternate in one invocation; writes
# experiments/results/supervision/results.md: how each run ended, each
# site's final accuracy (equal at every site: one model), the restart the
# launcher made, and the time lost (wall time against the untouched run of
# the same pair). Run folders stay under experiments/results/supervision/runs/,
# each run's launcher log beside its folder, gzipped once the table is
# written (runs/<run>.log.gz).
#
# Usage: bash experiments/run_supervision.sh [PAIRS]   (default 2)
# Environment: GEOPS (default build/cli/geops), KILL_AT (default 1000 of 2000 clocks).
set -euo pipefail
cd "$(dirname "$0")/.."
geops=${GEOPS:-build/cli/geops}
pairs=${1:-2}
kill_at=${KILL_AT:-1000}
results=experiments/results/supervision
mkdir -p "$results/runs"
[ -x "$geops" ] || bash scripts/build.sh geops geops_python

# The example's topology with every shard in a store (the killed worker's
# site keeps training; a restarted shard would resume from it).
topology=examples/fashion_mnist_cnn/.supervision.toml
trap 'rm -f "$topology"' EXIT
{ cat examples/fashion_mnist_cnn/three_sites.toml; printf '\n[storage]\ndata_dir = "stores"\ndurability = "async"\n'; } > "$topology"

# Kills the launcher's child that runs worker 0 of eu-west-1 once its
# progress reaches clock $kill_at (its GEOPS_SITE / GEOPS_WORKER tell it
# apart). Only a process this script's launch started is signalled.
killer() {  # killer LAUNCHER_PID OUT
  local launcher=$1 out=$2 pid
  for _ in $(seq 1 6000); do
    if grep -q "\"event\":\"progress\".*\"site\":\"eu-west-1\".*\"worker\":0" "$out/events.jsonl" 2>/dev/null &&
       /usr/bin/python3 - "$out/events.jsonl" "$kill_at" <<'PY'
import json, sys
hit = any(e.get("event") == "progress" and e.get("site") == "eu-west-1" and e.get("worker") == 0
          and (e.get("clock") or 0) >= int(sys.argv[2])
          for e in map(json.loads, open(sys.argv[1])))
sys.exit(0 if hit else 1)
PY
    then
      for pid in $(pgrep -P "$launcher"); do
        if tr '\0' '\n' < "/proc/$pid/environ" 2>/dev/null | grep -qx "GEOPS_SITE=eu-west-1" &&
           tr '\0' '\n' < "/proc/$pid/environ" 2>/dev/null | grep -qx "GEOPS_WORKER=0"; then
          kill -KILL "$pid" && echo "killed eu-west-1 worker 0 (pid $pid) at clock >= $kill_at" && return 0
        fi
      done
    fi
    sleep 0.1
  done
  echo "never saw clock $kill_at" >&2
}

for i in $(seq 1 "$pairs"); do
  for kind in untouched killed; do
    out=$results/runs/$kind-$i
    echo "== $kind $i"
    "$geops" launch "$topology" --out "$out" --replace --plain --timeout 1800 > "$results/runs/$kind-$i.log" 2>&1 &
    launcher=$!
    if [ "$kind" = killed ]; then killer "$launcher" "$out" >> "$results/runs/$kind-$i.log" 2>&1 || true; fi
    wait "$launcher" || echo "$kind $i ended with a failure (see its log)"
  done
done
{
  echo "# A worker killed mid-run under geops launch"
  echo
  echo "Command: \`bash experiments/run_supervision.sh $pairs\` (KILL_AT=$kill_at), on $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')), $(date -u +%Y-%m-%d)."
  echo
  /usr/bin/python3 experiments/summarize_supervision.py "$results/runs"
} > "$results/results.md"
# The launcher logs are kept gzipped (the table reads summary.json only).
find "$results/runs" -maxdepth 1 -type f -name '*.log' -exec gzip -9nf {} +
cat "$results/results.md"
