#!/usr/bin/env bash
# DiLoCo with its outer step in the shard stores: the default topology's
# diloco run (experiments/results/wan/default/topologies/diloco.toml: three
# sites, H 50, int4 pseudo-gradients, Nesterov outer step) launched three
# times in one invocation:
#   memory    as committed, no store;
#   stored    with [storage] (fsync at every commit): theta, the outer
#             momentum and the contributions in flight commit with the
#             shard's chunks;
#   killed    stored, and eu-west-1 (both its processes) SIGKILLed at clock
#             400 and restarted 5 s later from its stores.
# Writes under experiments/results/diloco_storage/: one launch folder per
# run, its log, the topologies and results.md (table, command, date,
# machine). The raw logs and event logs (*.log, *.jsonl) are gzipped in
# place once the table is written, as they are committed.
#
# Usage: bash experiments/run_diloco_storage.sh
# Environment: GEOPS (default build/cli/geops), TIMEOUT (seconds per run,
#   default 900).
set -euo pipefail
cd "$(dirname "$0")/.."
geops=${GEOPS:-build/cli/geops}
timeout=${TIMEOUT:-900}
results=experiments/results/diloco_storage
topos=$results/topologies
rm -rf "$results"
mkdir -p "$topos"

trace_dir=$(realpath --relative-to="$topos" experiments/traces/skyplane-aws3)
base=experiments/results/wan/default/topologies/diloco.toml
sed -e "0,/^name = .*/s//name = \"diloco-memory\"/" -e "s|^trace_dir = .*|trace_dir = \"$trace_dir\"|" \
  "$base" > "$topos/memory.toml"
sed -e "0,/^name = .*/s//name = \"diloco-stored\"/" "$topos/memory.toml" > "$topos/stored.toml"
printf '\n[storage]\ndata_dir = "data"\ndurability = "sync"\n' >> "$topos/stored.toml"
sed -e "0,/^name = .*/s//name = \"diloco-killed\"/" "$topos/stored.toml" > "$topos/killed.toml"
printf '\n[[faults]]\nkind = "kill-site"\nsite = "eu-west-1"\nat_clock = 400\nrestart_after_s = 5.0\n' \
  >> "$topos/killed.toml"

for run in memory stored killed; do
  echo "=== $run ($(date -u +%H:%M:%S))"
  "$geops" launch "$topos/$run.toml" --out "$results/$run" --replace --plain --timeout "$timeout" \
    > "$results/$run.log" 2>&1 || echo "run $run exited with $?" >&2
  tail -n 3 "$results/$run.log"
  rm -rf "$results/$run/data"  # the stores: large, and only for this run
done
# The logs name where this checkout was: the record keeps paths relative.
grep -rlF "$PWD/" "$results" | xargs -r sed -i "s#$PWD/##g"

python3 - "$results" <<'PY'
import json, os, subprocess, sys, datetime
results = sys.argv[1]
rows = []
for run in ["memory", "stored", "killed"]:
    try:
        s = json.load(open(os.path.join(results, run, "summary.json")))
    except (OSError, ValueError):
        rows.append(f"| {run} | run failed (see {run}.log.gz) | | | | | |")
        continue
    acc = s.get("test_accuracy_by_site") or {}
    accs = ", ".join(f"{k} {v:.4f}" for k, v in sorted(acc.items()))
    ttt = s.get("time_to_target_seconds")
    commits = sum((st.get("store_commits") or 0) for st in (s.get("shard_stats") or []))
    faults = s.get("faults") or []
    fault = faults[0].get("state", "-") if faults else "-"
    rows.append(f"| {run} | {accs} | {ttt if ttt is None else round(ttt, 1)} | {s.get('wall_seconds', 0):.1f} | "
                f"{(s.get('wan_bytes') or 0) / 1e6:.1f} | {commits} | {fault} |")
nproc = os.cpu_count()
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
with open(os.path.join(results, "results.md"), "w") as f:
    f.write("# DiLoCo with its outer step in the shard stores\n\n")
    f.write("command: bash experiments/run_diloco_storage.sh\n")
    f.write(f"date: {datetime.datetime.utcnow().strftime('%Y-%m-%dT%H:%M:%SZ')}\n")
    f.write(f"machine: {nproc} cores, {cpu}\ngeops: {head}\n\n")
    f.write("The default topology's diloco run (three sites, H 50, int4, Nesterov outer step, "
            "experiments/results/wan/default/topologies/diloco.toml), one run each, one after the other:\n"
            "`memory` without a store, `stored` with `[storage]` (fsync at every commit), `killed` stored "
            "with eu-west-1's shard and workers SIGKILLed at clock 400 and restarted 5 s later.\n\n")
    f.write("| run | final accuracy by site | time to 0.85 s | wall s | WAN MB | store commits | fault |\n")
    f.write("|---|---|---:|---:|---:|---:|---|\n")
    f.write("\n".join(rows) + "\n")
print(open(os.path.join(results, "results.md")).read())
PY
# The raw logs and event logs are kept gzipped (the table reads summary.json).
find "$results" -type f \( -name '*.log' -o -name '*.jsonl' \) -exec gzip -9nf {} +
