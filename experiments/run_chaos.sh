#!/usr/bin/env bash
# Chaos benchmark: `geops chaos` (supervisor/chaos/chaos.h) acting as the supervisor of
# three sites started by hand, killing workers, single shards and whole
# sites with SIGKILL at random moments and restarting exactly the killed
# command lines; every run must end with every site's counter exact and no
# intervention. Three sets:
#   mixed   20 seeded runs x 5 kills (1 during the end-of-run drain) of any
#           kind, restarted after 1-10 s, on experiments/topologies/chaos.toml
#           (3 sites x 2 shards x 2 workers, 250k parameters, asp, DS 4,
#           sync RocksDB stores, 3 s leases);
#   shard   5 runs x 5 single-shard kills restarted within 0.2-1 s (the
#           stall target: median under 2 s);
#   size    restart -> training again for single-shard kills at 1M and 100M
#           parameters (2 sites x 1 shard x 1 worker: three replicas of
#           100M with their WAN state did not fit beside each other here
#           when this was measured; see experiments/results/memory);
#   tls     5 runs of the mixed set with mutual TLS on every port
#           ([security] certs, certificates made by `geops certs`).
# Writes experiments/results/chaos/results.md (experiments/summarize_chaos.py)
# and each run's chaos.json under experiments/results/chaos/runs/.
#
# Usage: bash experiments/run_chaos.sh [SET ...]   (default: mixed shard size tls)
#   RUNS (20): runs of the mixed set. GEOPS: the geops binary (build/cli/geops).
set -euo pipefail
cd "$(dirname "$0")/.."
geops=${GEOPS:-build/cli/geops}
results=experiments/results/chaos
sets=("$@")
[ ${#sets[@]} -eq 0 ] && sets=(mixed shard size tls)
runs=${RUNS:-20}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$results/runs"
[ -x "$geops" ] || { echo "run_chaos: $geops is missing (build it first)" >&2; exit 1; }

# One chaos run: NAME TOPOLOGY FLAGS...; keeps its chaos.json, fails loudly.
run() {
  local name=$1 topo=$2
  shift 2
  local out=$work/$name
  echo "== $name: geops chaos $topo $*"
  if ! "$geops" chaos "$topo" --out "$out" "$@" >"$work/$name.txt" 2>&1; then
    tail -30 "$work/$name.txt" >&2
    cp "$out/chaos.json" "$results/runs/$name.json" 2>/dev/null || true
    echo "run_chaos: $name FAILED" >&2
    return 1
  fi
  grep -E "PASSED|kill " "$work/$name.txt" | tail -8
  cp "$out/chaos.json" "$results/runs/$name.json"
  # The record names paths relative to the checkout, temporary ones by role.
  sed -i -e "s|$(pwd)/||g" -e "s|$work/|<temporary>/|g" "$results/runs/$name.json"
  rm -rf "$out"
}

# A two-site variant of chaos.toml with one shard and one worker per site
# and a `layers = [$2, $3]` model, $4 clocks.
sized() {
  sed -e "s/^layers = .*/layers = [$2, $3]/" -e "s/^clocks = .*/clocks = $4/" \
      -e "s/^shards = 2/shards = 1/" -e "s/^workers = 2/workers = 1/" \
      -e 's/^rpc_timeout_ms = .*/rpc_timeout_ms = 120000/' \
      -e 's/^bandwidth_mbps = .*/bandwidth_mbps = 10000/' -e 's/^worker_lease_ms = .*/worker_lease_ms = 30000/' -e 's/^peer_lease_ms = .*/peer_lease_ms = 30000/' \
      experiments/topologies/chaos.toml |
    awk '/^\[\[sites\]\]/ {n++} n < 3 {print}' |
    awk '/^\[\[links\]\]/ {l++; if (l > 1) skip = 5} skip > 0 {skip--; next} {print}' >"$work/$1.toml"
  echo "$work/$1.toml"
}

# Only the sets run now are replaced; results.md sums up every kept run.
for set in "${sets[@]}"; do rm -f "$results/runs/$set-"*.json; done
failed=0
for set in "${sets[@]}"; do
  case $set in
    mixed)
      for ((s = 1; s <= runs; s++)); do
        run "mixed-seed$s" experiments/topologies/chaos.toml --seed "$s" --kills 5 --drain-kills 1 \
          --restart-min-ms 1000 --restart-max-ms 10000 || failed=$((failed + 1))
      done ;;
    shard)
      for s in 1 2 3 4 5; do
        run "shard-seed$s" experiments/topologies/chaos.toml --seed "$s" --kills 5 --drain-kills 0 --kinds shard \
          --restart-min-ms 200 --restart-max-ms 1000 || failed=$((failed + 1))
      done ;;
    size)
      run "size-1m" "$(sized size-1m 1000 1000 200)" --seed 1 --kills 3 --drain-kills 0 --kinds shard \
        --restart-min-ms 500 --restart-max-ms 1000 --stall-bound 300 || failed=$((failed + 1))
      run "size-100m" "$(sized size-100m 10000 10000 16)" --seed 1 --kills 2 --drain-kills 0 --kinds shard \
        --restart-min-ms 500 --restart-max-ms 1000 --stall-bound 600 --timeout 3000 || failed=$((failed + 1))
      ;;
    tls)
      # chaos.toml with a certificate folder beside it (paths in a topology
      # are taken from its own folder).
      mkdir -p "$work/tls"
      cp experiments/topologies/chaos.toml "$work/tls/chaos.toml"
      printf '\n[security]\ncerts = "certs"\n' >>"$work/tls/chaos.toml"
      "$geops" certs "$work/tls/chaos.toml" --out "$work/tls/certs" >/dev/null
      for s in 1 2 3 4 5; do
        run "tls-seed$s" "$work/tls/chaos.toml" --seed "$s" --kills 5 --drain-kills 1 \
          --restart-min-ms 1000 --restart-max-ms 10000 || failed=$((failed + 1))
      done ;;
    *) echo "run_chaos: unknown set '$set' (mixed, shard, size, tls)" >&2; exit 2 ;;
  esac
done

NPROC=$(nproc) CPU_MODEL=$(lscpu | sed -n 's/^Model name: *//p' | head -1) DATE_UTC=$(date -u '+%Y-%m-%d %H:%M UTC') \
  COMMAND_LINE="bash experiments/run_chaos.sh${*:+ $*}" python3 experiments/summarize_chaos.py "$results/runs" \
  >"$results/results.md"
echo "wrote $results/results.md"
[ "$failed" -eq 0 ] || { echo "run_chaos: $failed run(s) failed" >&2; exit 1; }
