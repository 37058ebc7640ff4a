#!/usr/bin/env bash
# The cost of metrics: the main job (experiments/topologies/default.toml)
# with every process serving /metrics and a Prometheus server scraping them
# every second, against the same job with no metrics endpoint at all.
# Alternates the two, RUNS times each, and writes
# experiments/results/metrics_cost.md (median time to 0.85, median wall time
# and training examples per second).
#
# Usage: bash experiments/run_metrics_cost.sh [RUNS]   (default 3)
# Needs Debian's prometheus (scripts/setup.sh installs it).
set -euo pipefail
cd "$(dirname "$0")/.."
geops=${GEOPS:-build/cli/geops}
runs=${1:-3}
work=$(mktemp -d)
prom_pid=""
cleanup() {
  [ -n "$prom_pid" ] && kill "$prom_pid" 2> /dev/null && wait "$prom_pid" 2> /dev/null
  rm -rf "$work"
}
trap cleanup EXIT
base=experiments/topologies/default.toml
trace_dir=$(realpath experiments/traces/skyplane-aws3)
sed -e "s|^trace_dir = .*|trace_dir = \"$trace_dir\"|" -e 's/^eval_every = .*/eval_every = 50/' "$base" > "$work/on.toml"
sed -e 's/^metrics_base_port = .*/metrics_base_port = -1/' "$work/on.toml" > "$work/off.toml"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
results=()
for i in $(seq 1 "$runs"); do
  for mode in off on; do
    out=$work/$mode-$i
    if [ "$mode" = on ]; then
      # Prometheus scrapes every second from the targets file the launch writes.
      mkdir -p "$out"
      printf 'global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: geops\n    file_sd_configs:\n      - files: [%s]\n        refresh_interval: 1s\n' \
        "$out/prometheus_targets.json" > "$work/prom.yml"
      prometheus --config.file="$work/prom.yml" --storage.tsdb.path="$work/tsdb-$i" \
        --web.listen-address="127.0.0.1:$port" > "$work/prom-$i.log" 2>&1 &
      prom_pid=$!
    fi
    "$geops" launch "$work/$mode.toml" --out "$out" --replace --plain --timeout 600 > "$work/$mode-$i.log" 2>&1 || true
    if [ "$mode" = on ]; then
      # Targets Prometheus scraped successfully at least once during the run.
      scraped=$(python3 -c '
import json, sys, urllib.parse, urllib.request
q = "count(max_over_time(up[10m]) == 1)"
r = json.load(urllib.request.urlopen("http://127.0.0.1:%s/api/v1/query?query=%s" % (sys.argv[1], urllib.parse.quote(q)), timeout=5))
res = r["data"]["result"]
print(res[0]["value"][1] if res else 0)' "$port" 2> /dev/null || echo "?")
      kill "$prom_pid"; wait "$prom_pid" 2> /dev/null || true; prom_pid=""
    else
      scraped=-
    fi
    results+=("$(python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); print(sys.argv[2], s.get("time_to_target_seconds"), s.get("wall_seconds"), s.get("examples_per_second"), s.get("test_accuracy"), sys.argv[3])' "$out/summary.json" "$mode" "$scraped")")
    echo "${results[-1]}"
  done
done
python3 - "$runs" "${results[@]}" <<'PY' > experiments/results/metrics_cost.md
import statistics, subprocess, sys, datetime, os
runs = int(sys.argv[1]); rows = [r.split() for r in sys.argv[2:]]
def med(mode, i):
    v = [float(r[i]) for r in rows if r[0] == mode and r[i] not in ("None", "-")]
    return statistics.median(v) if v else float("nan")
cpu = open("/proc/cpuinfo").read().split("model name")[1].split("\n")[0].split(":", 1)[1].strip()
print("# The cost of metrics\n")
print("Command: `bash experiments/run_metrics_cost.sh %d`  " % runs)
print("Date: %s. Machine: %d cores, %s." % (datetime.date.today(), os.cpu_count(), cpu))
print("\nThe main job (default topology, evaluations every 50 clocks), alternating: no metrics endpoint (`metrics_base_port = -1`) and every shard and worker serving /metrics with a Prometheus server scraping all of them every second.\n")
print("| run | metrics | time to 0.85 s | wall s | examples/s | accuracy | targets up |")
print("|---|---|---:|---:|---:|---:|---:|")
for n, r in enumerate(rows):
    tt = "%.1f" % float(r[1]) if r[1] != "None" else "-"
    print("| %d | %s | %s | %.1f | %.0f | %s | %s |" % (n // 2 + 1, r[0], tt, float(r[2]), float(r[3]), r[4], r[5]))
t_on, t_off = med("on", 1), med("off", 1)
w_on, w_off = med("on", 2), med("off", 2)
e_on, e_off = med("on", 3), med("off", 3)
print("\nMedians, on / off: time to 0.85 %.2fx (%.1f s vs %.1f s), wall %.3fx, examples per second %.3fx." % (t_on / t_off, t_on, t_off, w_on / w_off, e_on / e_off))
print("\nTime to target is quantised by the evaluation period (50 clocks, about 1.5 s) and moves by seconds between runs on this shared machine; wall time and examples per second are the finer measures.")
PY
cat experiments/results/metrics_cost.md
