#!/usr/bin/env bash
# LAN data plane against raw loopback TCP: geops' plaintext push+pull
# (experiments/bench/lan_throughput: a worker's update-with-clock RPC and
# read RPC against one shard over Thrift) next to iperf3 on the same
# loopback, measured in one invocation: iperf3, then lan_throughput, then
# iperf3 again, so that a machine shared with other work is seen by both.
#
# Units: both sides count bytes that crossed the loopback socket per second,
# 1 GB = 1e9 bytes. lan_throughput's push+pull moves the payload out and back
# one after the other (2 x payload per pair), iperf3 one direction all the
# time; with N clients, iperf3 runs N parallel streams (-P N).
#
# Usage: bash experiments/run_lan_vs_tcp.sh [BUILD_DIR]
#   BUILD_DIR  a configured CMake build folder (default: build); the
#              lan_throughput target is built in it (BUILD=0 skips that).
# Environment: ROUNDS (7), SIZES_MIB (1,16), CLIENTS (1,2), SECONDS_PER_RUN (iperf3
#   seconds per run, 10), OUT (experiments/results/lan_vs_tcp.md).
# Installs iperf3 with apt-get when it is missing (Debian package iperf3).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
rounds=${ROUNDS:-7}
sizes=${SIZES_MIB:-1,16}
clients=${CLIENTS:-1,2}
seconds=${SECONDS_PER_RUN:-10}
out=${OUT:-experiments/results/lan_vs_tcp.md}

if ! command -v iperf3 > /dev/null; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y iperf3 > /dev/null
fi
if [ "${BUILD:-1}" != 0 ]; then
  cmake --build "$build" -j "${JOBS:-$(nproc)}" --target lan_throughput
fi
bench=$build/experiments/bench/lan_throughput
[ -x "$bench" ] || { echo "run_lan_vs_tcp: $bench is missing (build it, or give the build folder)" >&2; exit 1; }

work=$(mktemp -d)
server_pid=""
cleanup() {
  [ -n "$server_pid" ] && kill "$server_pid" 2> /dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# A free loopback port for the iperf3 server.
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
iperf3 -s -B 127.0.0.1 -p "$port" > "$work/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 50); do
  iperf3 -c 127.0.0.1 -p "$port" -t 1 > /dev/null 2>&1 && break
  sleep 0.2
done

# GB/s (1e9 bytes/s) received by the server side over a run with $1 streams.
tcp_rate() {
  iperf3 -c 127.0.0.1 -p "$port" -t "$seconds" -P "$1" -J > "$work/iperf.json"
  python3 -c 'import json, sys; r = json.load(open(sys.argv[1])); print("%.3f" % (r["end"]["sum_received"]["bytes"] / r["end"]["sum_received"]["seconds"] / 1e9))' "$work/iperf.json"
}

declare -A before after
IFS=, read -r -a client_list <<< "$clients"
for n in "${client_list[@]}"; do before[$n]=$(tcp_rate "$n"); done
"$bench" --rounds="$rounds" --sizes_mib="$sizes" --clients="$clients" > "$work/lan.txt"
for n in "${client_list[@]}"; do after[$n]=$(tcp_rate "$n"); done

{
  echo "# LAN push+pull (plaintext) against loopback TCP (iperf3)"
  echo
  echo "command: \`bash experiments/run_lan_vs_tcp.sh${1:+ $1}\` (ROUNDS=$rounds, SIZES_MIB=$sizes, CLIENTS=$clients, iperf3 $seconds s per run)"
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "machine: $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(free -g | awk '/^Mem:/ {print $2}') GiB, Linux $(uname -r), $(iperf3 --version | head -1)"
  echo "geops: $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . || echo '+uncommitted')"
  echo
  echo "## lan_throughput"
  echo
  cat "$work/lan.txt"
  echo
  echo "## Against loopback TCP"
  echo
  echo "| payload | clients | push+pull GB/s | iperf3 GB/s (before / after) | push+pull / iperf3 (mean of before and after) |"
  echo "|---|---|---|---|---|"
  python3 - "$work/lan.txt" "$sizes" "$clients" "$(for n in "${client_list[@]}"; do echo -n "$n:${before[$n]}:${after[$n]},"; done)" <<'PY'
import sys
rows = {}
for line in open(sys.argv[1]):
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    if len(cells) == 14 and cells[0].endswith("MiB"):
        rows[(cells[0], cells[1])] = float(cells[8])  # push+pull GB/s
tcp = {}
for item in sys.argv[4].strip(",").split(","):
    n, b, a = item.split(":")
    tcp[n] = (float(b), float(a))
for mib in sys.argv[2].split(","):
    for n in sys.argv[3].split(","):
        pp = rows.get((f"{mib} MiB", n))
        b, a = tcp[n]
        mean = (b + a) / 2
        ratio = f"{pp / mean:.2f}" if pp is not None and mean > 0 else "n/a"
        print(f"| {mib} MiB | {n} | {pp if pp is not None else 'n/a'} | {b:.2f} / {a:.2f} | {ratio} |")
PY
} > "$out"
cat "$out"
