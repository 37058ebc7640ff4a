#!/usr/bin/env bash
# Site recovery benchmark: how fast the other sites notice a dead site
# (detect) and how fast the dead site, restarted from its RocksDB stores, is
# back within DS clocks of them (catch up), for models of 1M and 100M
# parameters.
#
# Each run is one `geops launch` of a generated topology of three sites
# (100m-2: two sites, as 100M was first measured, when three replicas of
# 100M parameters did not fit this machine's 24 GiB; since the memory cuts
# of experiments/results/memory three sites of 250M do): the
# counter workload (every worker adds 1.0 to every parameter per clock, so
# the end state is checked exactly), 1 shard and 1 worker per site, shards
# persisting with durability sync, asp with int4 values and DS 4, links
# of 10 Gbit/s and 5 ms (this measures recovery, not the WAN), a peer lease
# of 1 s. The fault plan kills every process of eu-west-1 at clock K and
# restarts it 2 s later (past the lease, so the others declare it down and
# train on meanwhile); in 1m-disk it also deletes the site's stores, so the
# site comes back empty and is bootstrapped by its peers. 1m-disk-diloco is
# the same disk loss in diloco (H 5, the outer step adding the sites'
# contributions up: lr 3, no momentum, fp32, so the counter stays exact):
# the new site takes the synchronised model and its own contributions from
# its peers' stores and its worker resumes after the last of them. 1m-stop
# is 1m with a planned stop instead of the kill (fault kind stop-site:
# SIGTERM, each process exits by itself) and adds
#   stop_seconds      SIGTERM -> the slowest of the site's shards exited
#                     (summary.json faults[].exits)
# summary.json's recoveries entry gives
#   detect_seconds    kill -> the first surviving site drops it (lease expiry)
#   catch_up_seconds  restart -> the restarted shards are back within DS
#                     clocks of every live peer (includes process start,
#                     loading the store and resending unacknowledged batches)
#   bytes_transferred batch bytes the restarted shards received meanwhile
#   reset_seconds     (disk loss) restart -> every survivor has taken the old
#                     contributions back and queued its snapshot (diloco:
#                     has taken in the rejoined site's merged state)
#   rejoin_seconds    (diloco disk loss) restart -> the new shards have merged
#                     their peers' states
# Writes experiments/results/recovery/results.md (and one folder per run,
# with the run's log beside it; their raw logs and event logs, *.log and
# *.jsonl, are gzipped in place once the table is written, as they are
# committed).
#
# Usage: bash experiments/run_recovery_bench.sh [SIZE ...]
#   SIZE: 1m 1m-stop 1m-disk 1m-disk-diloco 100m 100m-2 (default: 1m 1m-disk 100m). GEOPS: the
#   geops binary (default build/cli/geops). RESULTS: the results file
#   (default experiments/results/recovery/results.md).
set -euo pipefail
cd "$(dirname "$0")/.."
geops=${GEOPS:-build/cli/geops}
results=experiments/results/recovery
mkdir -p "$results/topologies"
sizes=("$@")
[ ${#sizes[@]} -eq 0 ] && sizes=(1m 1m-disk 100m)

# The [wan] mode lines of run $1.
wan_mode() {
  case $1 in
    *-diloco) printf 'mode = "diloco"\naveraging_period = 5\nouter_lr = 3.0\nouter_momentum = 0.0\nouter_average_last = false\ncodec = "fp32"\n' ;;
    *) printf 'mode = "asp"\nstaleness_ds = 4\nthreshold = 0.05\nthreshold_floor = 0.05\ncodec = "int4"\n' ;;
  esac
}

# The topology of run $1: a `layers = [$2, $3]` counter model, $4 clocks,
# eu-west-1 hit at clock $5 by fault kind $7 (default kill-site), and $6
# sites (2 or 3).
topology() {
  cat <<TOML
name = "recovery-$1"
[model]
workload = "counter"
layers = [$2, $3]
chunk_kib = 64
[training]
clocks = $4
staleness = 1
eval_every = 0
rpc_timeout_ms = 600000
[storage]
data_dir = "data"
durability = "sync"
[wan]
$(wan_mode "$1")
peer_lease_ms = 1000
links = "static"
[[faults]]
kind = "${7:-kill-site}"
site = "eu-west-1"
at_clock = $5
restart_after_s = 2
TOML
  local names=(us-east-1 eu-west-1 ap-northeast-1) i j
  for ((i = 0; i < $6; i++)); do
    for ((j = i + 1; j < $6; j++)); do
      printf '[[links]]\nsrc = "%s"\ndst = "%s"\nbandwidth_mbps = 10000\ndelay_ms = 5\n' "${names[i]}" "${names[j]}"
    done
  done
  for ((i = 0; i < $6; i++)); do
    printf '[[sites]]\nname = "%s"\nshards = 1\nworkers = 1\n' "${names[i]}"
  done
}

rows=()
for size in "${sizes[@]}"; do
  case $size in
    1m) topology "$size" 1000 1000 60 20 3 > "$results/topologies/$size.toml" ;;     # 1,001,000 parameters
    1m-stop) topology "$size" 1000 1000 60 20 3 stop-site > "$results/topologies/$size.toml" ;;  # SIGTERM, not SIGKILL
    1m-disk) topology "$size" 1000 1000 60 20 3 wipe-disk > "$results/topologies/$size.toml" ;;  # its stores deleted too
    1m-disk-diloco) topology "$size" 1000 1000 60 22 3 wipe-disk > "$results/topologies/$size.toml" ;;  # the same in diloco
    100m) topology "$size" 100000 1000 10 4 3 > "$results/topologies/$size.toml" ;;  # 100,001,000 parameters
    100m-2) topology "$size" 100000 1000 10 4 2 > "$results/topologies/$size.toml" ;;  # the same, two sites
    *) echo "unknown size $size (1m, 1m-stop, 1m-disk, 1m-disk-diloco, 100m or 100m-2)" >&2; exit 2 ;;
  esac
  echo "=== $size ($(date -u +%H:%M:%S))"
  rm -rf "$results/$size"
  "$geops" launch "$results/topologies/$size.toml" --out "$results/$size" --replace --plain --timeout 3000 \
    > "$results/$size.log" 2>&1 || echo "run $size exited with $?" >&2
  rm -rf "$results/$size/data"  # the stores: gigabytes, not results
  # Paths relative to the repository, not to the machine that ran it.
  grep -rlF "$PWD/" "$results/$size" "$results/$size.log" | xargs -r sed -i "s#$PWD/##g"
  tail -n 3 "$results/$size.log"
done

python3 - "$results" "${RESULTS:-$results/results.md}" "${sizes[@]}" <<'PY'
import json, os, sys, subprocess, datetime
results, out, sizes = sys.argv[1], sys.argv[2], sys.argv[3:]
lines = ["# Site recovery", "", "```",
         "command: " + ("RESULTS=" + os.path.relpath(out) + " " if os.path.relpath(out) != os.path.join(results, "results.md") else "") + "bash experiments/run_recovery_bench.sh " + " ".join(sizes),
         "date: " + datetime.datetime.utcnow().strftime("%Y-%m-%dT%H:%M:%SZ"),
         "machine: %s cores, %s" % (os.cpu_count(), subprocess.run(
             "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2", shell=True, capture_output=True,
             text=True).stdout.strip()),
         "```", "",
         "| run | parameters | sites | clocks | fault | at clock | stop s | detect s | rejoin s | reset s | catch up s | bytes to catch up | worker resumed at | counter error (max over sites) | exit |",
         "|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
params = {"1m": 1001000, "1m-stop": 1001000, "1m-disk": 1001000, "1m-disk-diloco": 1001000, "100m": 100001000,
          "100m-2": 100001000}
for size in sizes:
    path = os.path.join(results, size, "summary.json")
    if not os.path.exists(path):
        lines.append(f"| {size} | {params[size]:,} | - | - | - | - | - | - | - | - | - | - | - | - | no summary |")
        continue
    s = json.load(open(path))
    rec = (s.get("recoveries") or [{}])[0]
    f = (s.get("faults") or [{}])[0]
    errs = s.get("counter_max_abs_error_by_site") or {}
    fmt = lambda v, p=2: "-" if v is None else f"{v:.{p}f}"
    # The clock the hit site's worker resumed at (its second run).
    resumed = "-"
    for w in s.get("per_worker") or []:
        if w.get("site") == "eu-west-1" and len(w.get("start_clocks") or []) > 1:
            resumed = w["start_clocks"][-1]
    # A planned stop: the slowest of the site's shards, SIGTERM to exit (and
    # how it ended, unless every shard exited 0 by itself).
    stop = "-"
    if f.get("kind") == "stop-site":
        shards = {p: e for p, e in (f.get("exits") or {}).items() if "-shard-" in p}
        seconds = [e.get("seconds") for e in shards.values() if e.get("seconds") is not None]
        stop = fmt(max(seconds)) if seconds else "-"
        bad = [f"{p}: {e.get('exit')}" for p, e in shards.items()
               if e.get("exit") != "exit code 0" or e.get("killed_after_grace")]
        if bad:
            stop += " (" + "; ".join(bad) + ")"
    lines.append("| {} | {:,} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |".format(
        size, params[size], s.get("sites"), s.get("clocks"), rec.get("kind", "-"), f.get("clock_observed", "-"),
        stop, fmt(rec.get("detect_seconds")), fmt(rec.get("rejoin_seconds")), fmt(rec.get("reset_seconds")),
        fmt(rec.get("catch_up_seconds")), rec.get("bytes_transferred", "-"), resumed,
        fmt(max(errs.values()) if errs else None, 1), s.get("exit")))
    if rec.get("note"):
        lines.append(f"|  | note: {rec['note']} | | | | | | | | | | | | | |")
    if s.get("failure"):
        lines.append(f"|  | failure: {s['failure']} | | | | | | | | | | | | | |")
lines += ["", "stop (1m-stop, fault kind stop-site): from the SIGTERM to the slowest of the site's shard "
          "processes exiting by itself: it stops serving, gives what it handed to the WAN links up to 5 s to "
          "leave, commits its store and exits 0 (anything else is named beside the figure). "
          "detect: from the SIGKILL (or SIGTERM) to the first surviving shard dropping the site from its mirror clock "
          "(the peer lease is 1 s, heartbeats every 250 ms). catch up: from the restart to the restarted "
          "shards being within DS = 4 clocks of every live peer; it includes starting the processes, "
          "loading the RocksDB store (chunk values and the WAN outbound state), resending unacknowledged "
          "batches, and the restarted workers training the clocks they are behind (the other sites wait "
          "at the drift bound once the site reports in). Disk loss (1m-disk): reset is from the restart "
          "until every surviving shard has taken the lost site's old contributions back out of its "
          "replica (its ledger) and queued its own mass for the new one; the new site's workers then train "
          "again from clock 0 while the others go on (it rejoins their mirror clock once within DS), so its "
          "catch up is the time to redo its clocks. Disk loss in diloco (1m-disk-diloco): rejoin is from "
          "the restart until the new shards have merged their peers' outer states (the synchronised model, "
          "its momentum and the contributions they hold), reset until every surviving shard has taken the "
          "rejoined site's merged state in; the worker resumes after the last contribution of its site a "
          "peer held (worker resumed at), not at clock 0. The counter error is 0 when every replica ends "
          "exactly equal to the sum of every acknowledged update (for disk loss in asp: of the surviving "
          "incarnations; in diloco every clock of every worker counts once).", ""]
open(out, "w").write("\n".join(lines))
print("\n".join(lines))
PY
# The raw logs and event logs of the runs made now are kept gzipped (the
# table reads summary.json).
for size in "${sizes[@]}"; do
  for p in "$results/$size" "$results/$size.log"; do
    if [ -e "$p" ]; then
      find "$p" -type f \( -name '*.log' -o -name '*.jsonl' \) -exec gzip -9nf {} +
    fi
  done
done
