#!/usr/bin/env bash
# Client data-plane benchmark: bytes per second that one worker moves between
# its model and a site through the Python package (geops.init / ps.pull /
# ps.push / ps.clock, experiments/bench/python_data_plane.py) next to the
# same loop through the C++ client (worker::PsClient,
# experiments/bench/client_data_plane.cc).
#
# Both sides train the same client-defined model (`[model] workload =
# "client"`): by default 4 tables of 4000x1000, 3000x1000, 2000x1000 and
# 1000x1000 float32 (10M parameters, 40 MB), all zeros at the start, 16 KiB
# chunks, against one site of 2 shards on loopback (`geops site --port 0`;
# the addresses come from each shard's `@geops {"event":"listening",...}`
# line), staleness 0, one worker. Every clock pulls every chunk from the
# shards (staleness 0: a real read, never a cache hit), changes every
# element, pushes every chunk and advances the clock.
#
# A site fixes its model when the first worker registers and keeps the
# worker's clock, so every run gets a fresh site. The C++ and Python runs
# alternate (C++ first in odd rounds, Python first in even ones), so a
# machine shared with other work slows them alike; the medians of the rounds
# are compared. Writes experiments/results/client_data_plane.md and the raw
# result lines to experiments/results/client_data_plane.jsonl.
#
# Usage: bash experiments/run_client_bench.sh [BUILD_DIR]
#   BUILD_DIR  a CMake build folder (default: build); it is configured when
#              it has no CMakeCache.txt, then geops, geops_python and
#              client_data_plane are built in it (BUILD=0 skips building).
# Environment: ROUNDS (3), CLOCKS (timed clocks per run, 20), WARMUP (3),
#   TABLES (name:ROWSxCOLS,...), CHUNK_KIB (16), PYTHON (/usr/bin/python3,
#   the interpreter that sees Debian's python3-torch), JOBS (build jobs).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
rounds=${ROUNDS:-3}
clocks=${CLOCKS:-20}
warmup=${WARMUP:-3}
tables=${TABLES:-t0:4000x1000,t1:3000x1000,t2:2000x1000,t3:1000x1000}
chunk_kib=${CHUNK_KIB:-16}
python=${PYTHON:-/usr/bin/python3}
results=experiments/results
out_md=$results/client_data_plane.md
out_jsonl=$results/client_data_plane.jsonl
command_line="bash experiments/run_client_bench.sh${1:+ $1}"
for var in ROUNDS CLOCKS WARMUP TABLES CHUNK_KIB; do
  [ -n "${!var:-}" ] && command_line="$var=${!var} $command_line"
done

if [ "${BUILD:-1}" != 0 ]; then
  if [ ! -f "$build/CMakeCache.txt" ]; then
    cmake -S . -B "$build" -G Ninja -DGEOPS_ENABLE_CUDA=OFF -DGEOPS_BUILD_TESTS=OFF
  fi
  cmake --build "$build" -j "${JOBS:-$(nproc)}" --target geops geops_python client_data_plane
fi
geops=$build/cli/geops
bench=$build/experiments/bench/client_data_plane
for f in "$geops" "$bench" "$build/python/geops/__init__.py"; do
  [ -e "$f" ] || { echo "run_client_bench: $f is missing (build it, or give the build folder)" >&2; exit 1; }
done

work=$(mktemp -d)
site_pids=()

# Stops the shards this script started (by PID), each wait bounded.
stop_site() {
  local pid i
  for pid in "${site_pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${site_pids[@]}"; do
    for ((i = 0; i < 100; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid" 2>/dev/null || true; fi
    wait "$pid" 2>/dev/null || true
  done
  site_pids=()
}
cleanup() {
  stop_site
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

cat >"$work/topology.toml" <<TOML
name = "client-data-plane"
[model]
workload = "client"
chunk_kib = $chunk_kib
[training]
clocks = 1000000
staleness = 0
worker_lease_ms = 60000
rpc_timeout_ms = 120000
[[sites]]
name = "bench"
host = "127.0.0.1"
shards = 2
workers = 1
TOML

# Starts a fresh site of 2 shards on free ports; sets $shards to their addresses.
start_site() {
  local i t line addrs=() log
  for i in 0 1; do
    "$geops" site --topology "$work/topology.toml" --site bench --shard "$i" --port 0 \
      >"$work/shard-$i.log" 2>&1 &
    site_pids+=($!)
  done
  for i in 0 1; do
    log=$work/shard-$i.log
    line=""
    for ((t = 0; t < 300; t++)); do
      line=$(grep -m1 '^@geops .*"event":"listening"' "$log" || true)
      [ -n "$line" ] && break
      kill -0 "${site_pids[i]}" 2>/dev/null || break
      sleep 0.1
    done
    if [ -z "$line" ]; then
      echo "run_client_bench: shard $i did not start listening:" >&2
      cat "$log" >&2
      exit 1
    fi
    addrs+=("$("$python" -c 'import json, sys; print(json.loads(sys.argv[1][len("@geops "):])["address"])' "$line")")
  done
  shards=$(IFS=,; echo "${addrs[*]}")
}

# One run of side $1 (cpp or python) against a fresh site; appends its result line.
run_side() {
  local side=$1 round=$2 load_before load_after line
  start_site
  load_before=$(cut -d' ' -f1 /proc/loadavg)
  if [ "$side" = cpp ]; then
    timeout 600 "$bench" --shards="$shards" --topology="$work/topology.toml" --tables="$tables" \
      --clocks="$clocks" --warmup="$warmup" >"$work/out.txt" 2>&1 || { cat "$work/out.txt" >&2; exit 1; }
  else
    PYTHONPATH=$build/python timeout 600 "$python" experiments/bench/python_data_plane.py \
      --shards="$shards" --topology="$work/topology.toml" --tables="$tables" \
      --clocks="$clocks" --warmup="$warmup" >"$work/out.txt" 2>&1 || { cat "$work/out.txt" >&2; exit 1; }
  fi
  load_after=$(cut -d' ' -f1 /proc/loadavg)
  stop_site
  line=$(grep -m1 '^@bench ' "$work/out.txt") || { cat "$work/out.txt" >&2; exit 1; }
  grep -v '^@' "$work/out.txt" | sed "s/^/round $round: /"
  "$python" -c 'import json, sys; r = json.loads(sys.argv[1][len("@bench "):]); r.update(round=int(sys.argv[2]), load_before=float(sys.argv[3]), load_after=float(sys.argv[4])); print(json.dumps(r))' \
    "$line" "$round" "$load_before" "$load_after" >>"$work/results.jsonl"
}

date_utc=$(date -u '+%Y-%m-%d %H:%M UTC')
for ((r = 1; r <= rounds; r++)); do
  if ((r % 2)); then order=(cpp python); else order=(python cpp); fi
  for side in "${order[@]}"; do run_side "$side" "$r"; done
done

mkdir -p "$results"
cp "$work/results.jsonl" "$out_jsonl"
NPROC=$(nproc) CPU_MODEL=$(lscpu | sed -n 's/^Model name: *//p' | head -1) \
MEM=$(free -g | awk '/^Mem:/ {print $2}') KERNEL=$(uname -r) DATE_UTC=$date_utc \
WARMUP=$warmup COMMAND_LINE=$command_line "$python" - "$out_jsonl" "$out_md" <<'PY'
import json, os, statistics, sys

runs = [json.loads(l) for l in open(sys.argv[1])]
cpp = [r for r in runs if r["side"] == "cpp"]
py = [r for r in runs if r["side"] == "python"]


def plane(r):
    """Bytes per second over the client's own phases: pull + push + clock (the
    modification of the values, the application's work, left out)."""
    return r["bytes"] / ((r["pull_s"] + r["push_s"] + r["clock_s"]) * r["clocks"])


def med(rs, f):
    return statistics.median(f(r) for r in rs)


gb = lambda v: f"{v / 1e9:.3f}"
ms = lambda v: f"{1000 * v:.1f}"
e = runs[0]
lines = []
w = lines.append
w("# Client data plane: the Python package against the C++ client (loopback)")
w("")
w("One worker pulls and pushes a 10M-parameter model through a site of two")
w("shards on this machine, once through the C++ client (`worker::PsClient`,")
w("which `geops worker` uses) and once through the Python package (`geops`,")
w("the same PsClient under pybind11), and the bytes per second are compared.")
w("")
w("## How it was run")
w("")
w("```")
w(os.environ["COMMAND_LINE"])
w("```")
w("")
w(f"- Model: {e['elements']:,} float32 parameters in {e['tables']} tables (the script's default "
  "`t0:4000x1000,t1:3000x1000,t2:2000x1000,t3:1000x1000`), all zeros at the start, a client-defined "
  f"model (`[model] workload = \"client\"`), chunks of {e['chunk_bytes']} bytes.")
w(f"- Site: one `geops site` process per shard, {e['shards']} shards on loopback (`--port 0`), staleness 0, "
  "one worker, shards in memory (no `[storage]`). Every run gets a fresh site.")
w(f"- Each run: {os.environ['WARMUP']} untimed clocks, then {e['clocks']} timed clocks; "
  "C++ and Python runs alternate, C++ first in odd rounds.")
w(f"- Date: {os.environ['DATE_UTC']}.")
w(f"- Machine: `nproc` = {os.environ['NPROC']}, CPU model `{os.environ['CPU_MODEL']}` (lscpu), "
  f"{os.environ['MEM']} GiB RAM, Linux {os.environ['KERNEL']}, loopback TCP. The load average "
  "(1 min) before and after each run is in the table: other work on the machine slows both sides.")
w("")
w("## Results")
w("")
w("| round | side | GB/s (pull+push+clock) | GB/s (whole clock) | ms/clock | pull ms | modify ms | push ms | clock ms | MB/clock | load |")
w("|---|---|---|---|---|---|---|---|---|---|---|")
for r in runs:
    w(f"| {r['round']} | {'C++' if r['side'] == 'cpp' else 'Python'} | {gb(plane(r))} | {gb(r['bytes_per_second'])} | "
      f"{ms(r['seconds_per_clock'])} | {ms(r['pull_s'])} | {ms(r['modify_s'])} | {ms(r['push_s'])} | "
      f"{ms(r['clock_s'])} | {r['bytes'] / r['clocks'] / 1e6:.1f} | {r['load_before']:.1f} -> {r['load_after']:.1f} |")
w("")
w("Medians over the rounds:")
w("")
w("| side | GB/s (pull+push+clock) | GB/s (whole clock) | ms/clock | pull ms | modify ms | push ms | clock ms |")
w("|---|---|---|---|---|---|---|---|")
for name, rs in (("C++", cpp), ("Python", py)):
    w(f"| {name} | {gb(med(rs, plane))} | {gb(med(rs, lambda r: r['bytes_per_second']))} | "
      f"{ms(med(rs, lambda r: r['seconds_per_clock']))} | {ms(med(rs, lambda r: r['pull_s']))} | "
      f"{ms(med(rs, lambda r: r['modify_s']))} | {ms(med(rs, lambda r: r['push_s']))} | "
      f"{ms(med(rs, lambda r: r['clock_s']))} |")
ratio_plane = med(py, plane) / med(cpp, plane)
ratio_whole = med(py, lambda r: r["bytes_per_second"]) / med(cpp, lambda r: r["bytes_per_second"])
rounds = sorted({r["round"] for r in runs})
per_round = [plane(next(r for r in py if r["round"] == k)) / plane(next(r for r in cpp if r["round"] == k))
             for k in rounds if any(r["round"] == k for r in py) and any(r["round"] == k for r in cpp)]
w("")
w(f"**Python / C++, bytes per second (pull+push+clock): {ratio_plane:.3f}** (ratio of the medians; "
  f"within single rounds {min(per_round):.3f}-{max(per_round):.3f}). "
  f"Over the whole clock, the modification included: {ratio_whole:.3f}. "
  + ("The bar (>= 0.90) holds in this run." if ratio_plane >= 0.9 else
     "The bar (>= 0.90) does not hold in this run; see the end of this file for where the difference goes."))
w("")
w("## What the figures mean")
w("")
w("- **bytes**: what the client's Thrift connections sent and received during the timed clocks, as the")
w("  client counts them (`PsClient::stats()`, `ps.stats()` in Python): socket bytes, so framing and chunk")
w("  keys are in, as are the heartbeats (a few bytes a second). A clock moves the model twice: the read")
w("  brings every chunk in, the update sends every chunk out, so *MB/clock* is about 2 x 40 MB on both sides.")
w("- **GB/s (pull+push+clock)**: bytes / the time spent in the client's calls (pull, push, clock), the")
w("  modification of the values left out (it is the application's work: C++ writes its deltas, Python")
w("  changes the parameters); 1 GB = 1e9 bytes. This is the figure the Python package is held to:")
w("  >= 90% of C++.")
w("- **GB/s (whole clock)**: bytes / the wall time of the timed clocks, every phase included.")
w("- **pull**: C++ `PsClient::ReadAt(clock, 0)`, every chunk read from the shards into the client's cache;")
w("  Python `ps.pull(staleness=0)`, the same read, then the cache copied into the torch parameters in place.")
w("- **modify**: C++ writes 1e-3 into every element of its own delta buffers; Python `p.add_(1e-3)` on")
w("  every parameter (one torch thread).")
w("- **push**: C++ `PsClient::Update(table, 0, delta)` per table (what the C++ client library's push does):")
w("  adds the deltas into the op-log, marks the chunks dirty. Python `ps.push()`: checks every value for")
w("  NaN/Inf and writes parameter - pulled value into the op-log, in one pass.")
w("- **clock**: `PsClient::Clock()` / `ps.clock()`: one update batch per shard with every chunk, in parallel,")
w("  then the clock advanced on every shard; the deltas are added into the cache.")
w("- **load**: the machine's 1-minute load average before -> after the run.")
w("")
w("Both sides run the same PsClient and Thrift code for the read and the update batches. What Python adds")
w("per clock is a second copy of the model at pull (the tensors, next to the client's cache, written from")
w("each reply chunk while it is in the CPU's cache) and, in push, a subtraction with the NaN/Inf check that")
w("C++ does not make (C++ only adds its deltas); each is one pass over 40 MB of memory, run without the")
w("GIL. For a model larger than the CPU's caches (8 MiB on), both copies of a pull and the push's op-log")
w("are written with streaming stores (worker/stream_copy.h): an ordinary store first reads each cold line")
w("from memory, so a copy into a 40 MB buffer moves 80 MB. The second copy is the part of the difference")
w("that stays: C++ reads the values in the client's cache, while Python needs them in its own tensors. On")
w("a loaded machine such memory passes slow down more than the loopback transfers do, so the ratio moves")
w("with the load.")
w("")
w("The clock phase, the same `PsClient::Clock()` on both sides, also measured 5-15% slower in the Python")
w("process in these runs; the cause is not known. It is not the helper thread that runs blocking calls")
w("so that Ctrl-C stays prompt (python/src/interruptible.h): running pull and clock on the Python thread")
w("instead made no difference beyond the noise in an interleaved comparison. Neither side takes page")
w("faults in the timed clocks (checked with getrusage).")
w("")
w("Until the push's NaN/Inf check and subtraction were fused into one vectorised pass")
w("(python/src/client.cc, `SubtractInto`), the check was a separate scalar pass: in an interleaved")
w("comparison on this machine (load about 6, 4 runs each) push took 26-32 ms per clock with the two")
w("passes and 8-12 ms fused, about 15% of the Python clock.")
open(sys.argv[2], "w").write("\n".join(lines) + "\n")
print(f"Python/C++ bytes per second (pull+push+clock): {ratio_plane:.3f}; whole clock: {ratio_whole:.3f}")
print(f"wrote {sys.argv[2]}")
PY
