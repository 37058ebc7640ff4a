#!/usr/bin/env bash
# A CNN with BatchNorm (experiments/bn_cnn/train.py) through three sites of
# one worker against one site of three workers, the same data slices and
# clocks, alternating in one invocation; writes
# experiments/results/bn_cnn/results.md (final accuracy at every site, the
# final drain's share of the WAN bytes). Every run's folder stays under
# experiments/results/bn_cnn/runs/ (summary.json, events, logs), and each
# run's launcher log beside it, gzipped once the table is written
# (runs/<run>.log.gz).
#
# Usage: bash experiments/run_bn_cnn.sh [PAIRS]   (default 2)
# Environment: GEOPS (default build/cli/geops), TIMEOUT (seconds per run).
set -euo pipefail
cd "$(dirname "$0")/.."
geops=${GEOPS:-build/cli/geops}
timeout=${TIMEOUT:-1800}
pairs=${1:-2}
results=experiments/results/bn_cnn
mkdir -p "$results/runs"
[ -x "$geops" ] || bash scripts/build.sh geops geops_python
for i in $(seq 1 "$pairs"); do
  for side in one_site three_sites; do
    echo "== $side $i"
    "$geops" launch "experiments/bn_cnn/$side.toml" --out "$results/runs/$side-$i" --replace --plain \
      --timeout "$timeout" > "$results/runs/$side-$i.log" 2>&1 || echo "$side $i failed (see its log)"
  done
done
{
  echo "# A CNN with BatchNorm: three sites against one"
  echo
  echo "Command: \`bash experiments/run_bn_cnn.sh $pairs\`, on $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')), $(date -u +%Y-%m-%d)."
  echo
  /usr/bin/python3 experiments/summarize_bn_cnn.py "$results/runs"
} > "$results/results.md"
# The launcher logs are kept gzipped (the table reads summary.json only).
find "$results/runs" -maxdepth 1 -type f -name '*.log' -exec gzip -9nf {} +
cat "$results/results.md"
