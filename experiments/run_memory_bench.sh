#!/usr/bin/env bash
# Memory per parameter: peak resident memory (VmHWM) of every shard and
# worker process while the counter model trains, at several model sizes,
# over one site and over two sites (asp), with storage off and sync.
#
#   one-site        1 site, 1 shard, 1 worker, no WAN, no store
#   asp             2 sites, 1 shard and 1 worker each, asp (int4), no store
#   asp-sync        the same with [storage] durability = "sync"
#   asp3-sync       3 sites, asp, storage sync (how large a model three sites
#                   train on one machine)
#
# Every process's /proc/PID/status is polled every 0.2 s while it runs; its
# VmHWM (the kernel's own high-water mark) is kept. Figures are per process,
# in MB and as a multiple of the fp32 model (4 bytes per parameter) that the
# process holds (a shard: its share; a worker: the whole model).
#
# Usage: bash experiments/run_memory_bench.sh [SIZE ...]   (10m 50m 100m 150m 250m; default 10m 50m)
#   CONFIGS="one-site asp asp-sync asp3-sync" chooses the configurations (default the first three).
#   TIMEOUT=SECONDS bounds each run (default 900; three sites of 150M need more on 2 cores).
# Writes experiments/results/memory/: results.md, results.json, memory.png.
set -euo pipefail
cd "$(dirname "$0")/.."
geops=${GEOPS:-build/cli/geops}
sizes=("$@")
[ ${#sizes[@]} -eq 0 ] && sizes=(10m 50m)
out=${OUT:-experiments/results/memory}
mkdir -p "$out"
work=$(mktemp -d)
launch_pid=""
cleanup() {
  [ -n "$launch_pid" ] && kill "$launch_pid" 2> /dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

layers_of() {
  case $1 in
    10m) echo "10000, 1000" ;;
    50m) echo "10000, 5000" ;;
    100m) echo "10000, 10000" ;;
    150m) echo "10000, 15000" ;;
    250m) echo "10000, 25000" ;;
    *) echo "unknown size $1 (10m, 50m, 100m, 150m, 250m)" >&2; exit 2 ;;
  esac
}

topology() {  # $1 name, $2 layers, $3 config
  cat <<TOML
name = "memory-$1"
[model]
workload = "counter"
layers = [$2]
chunk_kib = 256
[training]
clocks = 12
staleness = 1
eval_every = 0
rpc_timeout_ms = 600000
TOML
  case $3 in *-sync) printf '[storage]\ndata_dir = "data"\ndurability = "sync"\n' ;; esac
  if [ "$3" = one-site ]; then
    printf '[[sites]]\nname = "us-east-1"\nshards = 1\nworkers = 1\n'
  elif [ "$3" = asp3-sync ]; then
    printf '[wan]\nmode = "asp"\nstaleness_ds = 4\nthreshold = 0.05\nthreshold_floor = 0.05\ncodec = "int4"\nlinks = "static"\n'
    for pair in "us-east-1 eu-west-1" "us-east-1 ap-northeast-1" "eu-west-1 ap-northeast-1"; do
      read -r a b <<< "$pair"
      printf '[[links]]\nsrc = "%s"\ndst = "%s"\nbandwidth_mbps = 10000\ndelay_ms = 5\n' "$a" "$b"
    done
    for site in us-east-1 eu-west-1 ap-northeast-1; do
      printf '[[sites]]\nname = "%s"\nshards = 1\nworkers = 1\n' "$site"
    done
  else
    printf '[wan]\nmode = "asp"\nstaleness_ds = 4\nthreshold = 0.05\nthreshold_floor = 0.05\ncodec = "int4"\nlinks = "static"\n'
    printf '[[links]]\nsrc = "us-east-1"\ndst = "eu-west-1"\nbandwidth_mbps = 10000\ndelay_ms = 5\n'
    printf '[[sites]]\nname = "us-east-1"\nshards = 1\nworkers = 1\n[[sites]]\nname = "eu-west-1"\nshards = 1\nworkers = 1\n'
  fi
}

echo "[]" > "$work/rows.json"
for size in "${sizes[@]}"; do
  layers=$(layers_of "$size")
  for config in ${CONFIGS:-one-site asp asp-sync}; do
    name=$size-$config
    topo=$work/$name.toml
    topology "$name" "$layers" "$config" > "$topo"
    echo "=== $name ($(date -u +%H:%M:%S))"
    started=$(date +%s.%N)
    "$geops" launch "$topo" --out "$work/$name" --replace --plain --timeout "${TIMEOUT:-900}" > "$work/$name.log" 2>&1 &
    launch_pid=$!
    declare -A peak=()
    while kill -0 "$launch_pid" 2> /dev/null; do
      for pid in $(pgrep -f -- "--topology $topo" || true); do
        args=$(tr '\0' ' ' < "/proc/$pid/cmdline" 2> /dev/null || true)
        role=$(awk '{print $2}' <<< "$args")
        site=$(sed -n 's/.*--site \([^ ]*\).*/\1/p' <<< "$args")
        idx=$(sed -n 's/.*--\(shard\|worker\) \([0-9]*\).*/\2/p' <<< "$args")
        [ "$role" = site ] || [ "$role" = worker ] || continue
        kb=$(awk '/^VmHWM/ {print $2}' "/proc/$pid/status" 2> /dev/null || echo 0)
        key="$role $site $idx"
        if [ -n "$kb" ] && [ "${peak[$key]:-0}" -lt "$kb" ]; then peak[$key]=$kb; fi
      done
      sleep 0.2
    done
    wait "$launch_pid" || true
    launch_pid=""
    seconds=$(python3 -c "import sys; print(round(float(sys.argv[2]) - float(sys.argv[1]), 1))" "$started" "$(date +%s.%N)")
    for key in "${!peak[@]}"; do
      python3 - "$work/rows.json" "$size" "$config" "$key" "${peak[$key]}" "$work/$name/summary.json" "$seconds" <<'PY'
import json, sys
rows_path, size, config, key, kb, summary, seconds = sys.argv[1:8]
role, site, idx = key.split()
params = {"10m": 10_001_000, "50m": 50_005_000, "100m": 100_010_000, "150m": 150_015_000,
          "250m": 250_025_000}[size]
try:
    s = json.load(open(summary))
except Exception:
    s = {}
rows = json.load(open(rows_path))
rows.append({"size": size, "parameters": params, "config": config, "process": ("shard" if role == "site" else "worker"),
             "site": site, "index": int(idx or 0), "peak_rss_bytes": int(kb) * 1024,
             "model_multiple": int(kb) * 1024 / (4 * params), "bytes_per_parameter": int(kb) * 1024 / params,
             "counter_max_abs_error": s.get("counter_max_abs_error"), "exit": s.get("exit"),
             "run_seconds": float(seconds)})
json.dump(rows, open(rows_path, "w"))
PY
    done
    unset peak
    tail -n 3 "$work/$name.log"
  done
done
cp "$work/rows.json" "$out/results.json"

python=${PYTHON:-python3}
if ! "$python" -c 'import matplotlib' 2> /dev/null && [ -x /usr/bin/python3 ]; then python=/usr/bin/python3; fi
prefix=""
[ -n "${CONFIGS:-}" ] && prefix="CONFIGS=\"$CONFIGS\" "
[ "$out" != experiments/results/memory ] && prefix="OUT=$out $prefix"
"$python" - "$out" "$*" "$prefix" <<'PY'
import collections, datetime, json, os, sys
out, args, prefix = sys.argv[1], sys.argv[2], sys.argv[3]
rows = json.load(open(os.path.join(out, "results.json")))
cpu = open("/proc/cpuinfo").read().split("model name")[1].split("\n")[0].split(":", 1)[1].strip()
mem = int(open("/proc/meminfo").read().split("MemTotal:")[1].split()[0]) / 1048576
lines = ["# Memory per parameter", "",
         f"Command: `{prefix}bash experiments/run_memory_bench.sh {args}`".rstrip() + "  ",
         f"Date: {datetime.date.today()}. Machine: {os.cpu_count()} cores, {cpu}, {mem:.0f} GiB.", "",
         "The counter model (fp32, 12 clocks, chunks of 256 KiB), one shard and one worker per site. Peak RSS is "
         "each process's VmHWM, polled every 0.2 s; x model is that over the fp32 model the process holds "
         "(4 bytes per parameter: every shard here holds the whole model, as does every worker). Run s is the "
         "whole `geops launch` (start, 12 clocks, final checks), for the time a change costs.", "",
         "| parameters | config | process | peak RSS MB (per process) | x model | bytes / parameter | counter exact | exit | run s |",
         "|---:|---|---|---:|---:|---:|---|---|---:|"]
groups = collections.OrderedDict()
for r in rows:
    groups.setdefault((r["size"], r["config"], r["process"]), []).append(r)
for (size, config, proc), rs in groups.items():
    rss = [r["peak_rss_bytes"] / 1e6 for r in rs]
    mult = [r["model_multiple"] for r in rs]
    lines.append("| {:,} | {} | {} | {} | {} | {} | {} | {} | {} |".format(
        rs[0]["parameters"], config, proc, " / ".join(f"{v:.0f}" for v in rss),
        " / ".join(f"{v:.1f}" for v in mult), " / ".join(f"{r['bytes_per_parameter']:.1f}" for r in rs),
        "yes" if rs[0]["counter_max_abs_error"] == 0 else rs[0]["counter_max_abs_error"], rs[0]["exit"],
        rs[0].get("run_seconds", "")))
lines += ["", "The figures are whole processes; where the memory goes inside a shard (heaptrack, by component) "
          "is in experiments/results/memory/README.md.", ""]
open(os.path.join(out, "results.md"), "w").write("\n".join(lines))
print("\n".join(lines))
try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    labels = [f"{s}\n{c}\n{p}" for (s, c, p) in groups]
    vals = [max(r["model_multiple"] for r in rs) for rs in groups.values()]
    fig, ax = plt.subplots(figsize=(max(8, 0.7 * len(labels)), 4.5))
    ax.bar(range(len(vals)), vals)
    ax.set_xticks(range(len(vals)))
    ax.set_xticklabels(labels, fontsize=7)
    ax.set_ylabel("peak RSS / fp32 model bytes (largest process)")
    ax.set_title("Counter model, 1 shard + 1 worker per site: peak memory per process as a multiple of the model")
    ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "memory.png"), dpi=120)
except ImportError:
    pass
PY
