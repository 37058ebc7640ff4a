#!/usr/bin/env bash
# geops' LAN data plane next to ps-lite (https://github.com/dmlc/ps-lite), a
# public parameter server, on the same loopback in one invocation: first
# ps-lite's push, pull and push+pull (experiments/pslite/pslite_bench.cc),
# then geops' experiments/bench/lan_throughput, then a table of the ratios.
#
# ps-lite side: one scheduler, one server and W workers as separate
# processes on 127.0.0.1 (ps-lite's zmq van, DMLC_* environment variables),
# every worker pushing to and pulling from one key of S bytes of float32 that
# the server sums into its store; geops side: lan_throughput's W clients
# against one shard (the whole table per call). Units on both sides: payload
# bytes crossing the socket per second, both directions summed over all
# workers, 1 GB = 1e9 bytes (push = S per call, pull = S, push+pull = 2S per
# pair); the median of ROUNDS interleaved rounds of 1 s per mode.
#
# ps-lite's source: PSLITE_SRC, a checkout of https://github.com/dmlc/ps-lite
# (this script downloads nothing). It is compiled, unpatched, with
# experiments/pslite/CMakeLists.txt against Debian 12's libzmq3-dev and
# libprotobuf-dev/protobuf-compiler (ps-lite's own Makefile downloads zmq
# and protobuf; it is not used). Its commit is read from the checkout when
# it is a git work tree, else taken from PSLITE_COMMIT.
#
# Usage: PSLITE_SRC=DIR bash experiments/run_pslite_compare.sh [BUILD_DIR]
#   BUILD_DIR  the geops CMake build folder (default: build); lan_throughput
#              is built in it (BUILD=0 skips that), ps-lite and pslite_bench
#              in PSLITE_BUILD (default BUILD_DIR/pslite).
# Environment: PSLITE_SRC (required), PSLITE_COMMIT, PSLITE_BUILD, ROUNDS (7),
#   SECONDS_PER_RUN (seconds per mode and round, 1), SIZES_MIB (1,16),
#   WORKERS (1,2), JOBS (build jobs, 2), OUT (experiments/results/pslite_compare.md).
# Installs with apt-get what the ps-lite build needs when it is missing
# (Debian packages cmake, g++, pkg-config, libzmq3-dev, libprotobuf-dev,
# protobuf-compiler).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
rounds=${ROUNDS:-7}
seconds=${SECONDS_PER_RUN:-1}
sizes=${SIZES_MIB:-1,16}
workers=${WORKERS:-1,2}
jobs=${JOBS:-2}
out=${OUT:-experiments/results/pslite_compare.md}
pslite_build=${PSLITE_BUILD:-$build/pslite}

[ -n "${PSLITE_SRC:-}" ] || { echo "run_pslite_compare: set PSLITE_SRC to a checkout of https://github.com/dmlc/ps-lite" >&2; exit 1; }
[ -f "$PSLITE_SRC/include/ps/ps.h" ] || { echo "run_pslite_compare: PSLITE_SRC ($PSLITE_SRC) is not a ps-lite checkout" >&2; exit 1; }
pslite_src=$(cd "$PSLITE_SRC" && pwd -P)

# ps-lite's commit: the checkout's own HEAD (not that of a repository around it).
pslite_commit=${PSLITE_COMMIT:-unknown}
if top=$(git -C "$pslite_src" rev-parse --show-toplevel 2> /dev/null) && [ "$(cd "$top" && pwd -P)" = "$pslite_src" ]; then
  pslite_commit=$(git -C "$pslite_src" rev-parse HEAD)$(git -C "$pslite_src" diff --quiet HEAD -- . || echo '+uncommitted')
fi

packages=(cmake g++ pkg-config libzmq3-dev libprotobuf-dev protobuf-compiler)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2> /dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y "${missing[@]}" > /dev/null \
    || { apt-get update > /dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y "${missing[@]}" > /dev/null; }
fi

cmake -S experiments/pslite -B "$pslite_build" -DPSLITE_SRC="$pslite_src" -DCMAKE_BUILD_TYPE=Release > /dev/null
cmake --build "$pslite_build" -j "$jobs" > /dev/null
pslite_bench=$pslite_build/pslite_bench
if [ "${BUILD:-1}" != 0 ]; then
  cmake --build "$build" -j "$jobs" --target lan_throughput > /dev/null
fi
lan=$build/experiments/bench/lan_throughput
[ -x "$lan" ] || { echo "run_pslite_compare: $lan is missing (build it, or give the build folder)" >&2; exit 1; }

work=$(mktemp -d)
pids=()
cleanup() {
  local pid
  for pid in "${pids[@]}"; do kill "$pid" 2> /dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

# Each ps-lite process may run this long: the rounds, warm-ups, barriers and start-up.
limit=$((120 + rounds * 3 * (2 * ${seconds%.*} + 10)))

# One ps-lite run: payload $1 MiB, $2 workers; its table row goes to stdout
# (with the header when $3 is "header"). Tries twice: the free port found
# here can be taken before the scheduler binds it.
pslite_run() {
  local mib=$1 nw=$2 header=${3:-} try port rc pid i
  local args=(--size_mib="$mib" --rounds="$rounds" --seconds="$seconds")
  [ "$header" = header ] && args+=(--header)
  for try in 1 2; do
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    local run_pids=()
    rm -f "$work"/ps_*
    export DMLC_NUM_SERVER=1 DMLC_NUM_WORKER=$nw DMLC_PS_ROOT_URI=127.0.0.1 DMLC_PS_ROOT_PORT=$port \
      DMLC_NODE_HOST=127.0.0.1 DMLC_INTERFACE=lo
    DMLC_ROLE=scheduler timeout "$limit" "$pslite_bench" "${args[@]}" > "$work/ps_scheduler.out" 2> "$work/ps_scheduler.err" &
    run_pids+=($!)
    DMLC_ROLE=server timeout "$limit" "$pslite_bench" "${args[@]}" > "$work/ps_server.out" 2> "$work/ps_server.err" &
    run_pids+=($!)
    for ((i = 0; i < nw; ++i)); do
      DMLC_ROLE=worker timeout "$limit" "$pslite_bench" "${args[@]}" > "$work/ps_worker$i.out" 2> "$work/ps_worker$i.err" &
      run_pids+=($!)
    done
    pids+=("${run_pids[@]}")
    rc=0
    for pid in "${run_pids[@]}"; do wait "$pid" || rc=$?; done
    unset DMLC_NUM_SERVER DMLC_NUM_WORKER DMLC_PS_ROOT_URI DMLC_PS_ROOT_PORT DMLC_NODE_HOST DMLC_INTERFACE
    if [ "$rc" = 0 ] && grep -qh '^| [0-9]' "$work"/ps_worker*.out; then
      cat "$work"/ps_worker*.out
      return 0
    fi
    echo "run_pslite_compare: ps-lite run ($mib MiB, $nw workers, try $try) failed (exit $rc):" >&2
    tail -n 5 "$work"/ps_*.err >&2 || true
  done
  return 1
}

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
IFS=, read -r -a size_list <<< "$sizes"
IFS=, read -r -a worker_list <<< "$workers"
header=header
{
  for mib in "${size_list[@]}"; do
    for nw in "${worker_list[@]}"; do
      pslite_run "$mib" "$nw" "$header"
      header=""
    done
  done
} > "$work/pslite.txt"
timeout $((600 + 40 * rounds * ${#size_list[@]} * ${#worker_list[@]})) \
  "$lan" --rounds="$rounds" --seconds="$seconds" --sizes_mib="$sizes" --clients="$workers" > "$work/lan.txt" &
pids+=($!)
wait "$!"
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

version() { dpkg-query -W -f='${Version}' "$1" 2> /dev/null || echo unknown; }
{
  echo "# geops against ps-lite on loopback: push, pull, push+pull"
  echo
  echo "command: \`PSLITE_SRC=... bash experiments/run_pslite_compare.sh${1:+ $1}\` (ROUNDS=$rounds, SECONDS_PER_RUN=$seconds, SIZES_MIB=$sizes, WORKERS=$workers)"
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "machine: $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(free -g | awk '/^Mem:/ {print $2}') GiB, Linux $(uname -r); load average (1/5/15 min) $load_before at the start, $load_after at the end"
  echo "geops: $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . || echo '+uncommitted')"
  echo "ps-lite: $pslite_commit (https://github.com/dmlc/ps-lite), built unpatched with experiments/pslite/CMakeLists.txt: C++14, -O3, DMLC_USE_GLOG=0, g++ $(g++ -dumpfullversion 2> /dev/null || echo ?), Debian libzmq3-dev $(version libzmq3-dev), libprotobuf-dev $(version libprotobuf-dev)"
  echo
  echo "## ps-lite (experiments/pslite/pslite_bench)"
  echo
  echo "One scheduler, one server, W workers: separate processes, ps-lite's zmq van on 127.0.0.1"
  echo "(DMLC_NUM_SERVER=1, DMLC_NUM_WORKER=W, DMLC_PS_ROOT_URI=127.0.0.1, DMLC_NODE_HOST=127.0.0.1)."
  echo "Every worker uses key 0, S bytes of float32: push = \`kv.Wait(kv.Push(keys, vals))\`, pull ="
  echo "\`kv.Wait(kv.Pull(keys, &out))\`, push+pull = a push then a pull. The server adds each push into"
  echo "its store element-wise and answers a pull with a copy of the store (ps-lite's"
  echo "KVServerDefaultHandle, for a key holding a vector). Workers start each mode together (worker-group"
  echo "barriers); GB/s = payload bytes of all workers over the longest worker's wall time; median of"
  echo "$rounds rounds of $seconds s per mode, modes interleaved in each round."
  echo
  cat "$work/pslite.txt"
  echo
  echo "## geops (experiments/bench/lan_throughput)"
  echo
  echo "command: \`$lan --rounds=$rounds --seconds=$seconds --sizes_mib=$sizes --clients=$workers\`"
  echo
  cat "$work/lan.txt"
  echo
  echo "## geops / ps-lite"
  echo
  echo "Ratios of the medians above (geops' push, pull and push+pull GB/s over ps-lite's); above 1: geops moves more."
  echo
  echo "| payload | workers | push geops/ps-lite | pull geops/ps-lite | push+pull geops/ps-lite |"
  echo "|---|---|---|---|---|"
  python3 - "$work/pslite.txt" "$work/lan.txt" "$sizes" "$workers" <<'PY'
import sys

def rows(path, width):
    out = {}
    for line in open(path):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == width and cells[0].endswith("MiB"):
            out[(cells[0], cells[1])] = cells
    return out

def ratio(a, b):
    try:
        a, b = float(a), float(b)
    except ValueError:
        return "n/a"
    return f"{a / b:.2f}" if b > 0 else "n/a"

ps = rows(sys.argv[1], 7)    # payload, workers, push GB/s, push ms, pull GB/s, push+pull GB/s, push+pull ms
geops = rows(sys.argv[2], 14)  # lan_throughput: push GB/s 2, pull GB/s 7, push+pull GB/s 8
for mib in sys.argv[3].split(","):
    for n in sys.argv[4].split(","):
        key = (f"{mib} MiB", n)
        p, g = ps.get(key), geops.get(key)
        if p is None or g is None:
            print(f"| {mib} MiB | {n} | n/a | n/a | n/a |")
            continue
        print(f"| {mib} MiB | {n} | {ratio(g[2], p[2])} | {ratio(g[7], p[4])} | {ratio(g[8], p[5])} |")
PY
} > "$out"
cat "$out"
