#!/usr/bin/env bash
# Runs the WAN comparison over two scenarios, every mode on each:
#
#   default  experiments/topologies/default.toml: three AWS regions (us-east-1,
#            eu-west-1, ap-northeast-1), 1 shard and 2 workers each, one
#            connection's share of the Skyplane links: 49 - 68 Mbit/s,
#            42 - 107 ms one-way. LAN baseline: lan.toml (6 workers, 1 site).
#   harsh    experiments/topologies/harsh.toml: five AWS regions on five
#            continents, 1 shard and 1 worker each, 5.7 - 19.5 Mbit/s,
#            68 - 202 ms one-way (RTT 300 ms or more on 6 of 20 links).
#            LAN baseline: lan5.toml (5 workers, 1 site).
#
# Runs (the same names in both scenarios):
#   lan          the scenario's workers all in one site
#   bsp          every update every clock, fp32, global barrier; SSP 0
#                inside each site (fully synchronous)
#   all-async    every update every clock, fp32, no bound
#   asp          significant updates only, 4-bit, drift bound DS 8 plus the
#                clocks a report spends in delivery (at most 24 more)
#   diloco       DiLoCo: every 50 clocks each site's progress (4-bit, error
#                feedback) goes to every other, and every site applies the
#                same outer step (lr 0.7, Nesterov momentum 0.9), one step
#                in flight while the next 50 clocks run
#   asp-varying  asp with every link's bandwidth varying over time like a
#                cellular trace scaled to the link's mean, with its outages:
#                default, T-Mobile LTE driving; harsh, Verizon EVDO driving,
#                each link starting 37 s further into the trace than the last
#   and, on request: avg (models averaged every 10 clocks), diloco-int8
#   (every 20 clocks, 8-bit), diloco-stream (streaming DiLoCo: H 50 in 5
#   fragments, one every 10 clocks), diloco-sync (the DiLoCo paper's
#   synchronous step, every 25 clocks: the best H in
#   experiments/results/wan/probes/diloco_sync.md), asp-int8, asp-sign
#   (8-bit and 1-bit values), bsp-varying, asp-ds (asp with the bound at DS alone: no allowance),
#   asp-nolinks and all-async-nolinks (every link 1000 Mbit/s and 1 ms: what
#   the mode costs apart from the WAN's latency and bandwidth).
#
# bsp over the harsh links needs seconds per clock; it runs for BSP_TIMEOUT
# seconds (default 300) and its bytes to target are then extrapolated from
# its bytes per clock (results.md says so).
#
# Writes experiments/results/wan/<scenario>/: one launch folder per run
# (with run.json: what the run was), run_info.txt (command, date, machine),
# results.md (table, ratios, drift check) and PNGs made by
# experiments/plot_wan.py (python3-matplotlib). Once they are made, the raw
# logs and event logs there (*.log, *.jsonl) are gzipped in place, as they
# are committed; plot_wan.py reads either form.
#
# Usage: bash experiments/run_wan_comparison.sh [SCENARIO[:RUN,RUN...] ...]
#   e.g. `harsh:asp,lan default` (a scenario alone runs its default runs)
#   (default: default harsh)
# Environment: GEOPS (the geops binary; default build/cli/geops),
#   GEOPS_TRACES (the shared trace folder; default ../shared/traces next to
#   the repository), EVAL_EVERY (default 50), TIMEOUT (seconds per run,
#   default 1500), BSP_TIMEOUT (harsh bsp, default 300),
#   PYTHON (an interpreter with matplotlib; default python3).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
geops=${GEOPS:-build/cli/geops}
traces=${GEOPS_TRACES:-$root/../shared/traces}
eval_every=${EVAL_EVERY:-50}
timeout=${TIMEOUT:-1500}
bsp_timeout=${BSP_TIMEOUT:-300}
default_runs="lan,bsp,all-async,asp,diloco,asp-varying"
specs=("$@")
[ ${#specs[@]} -eq 0 ] && specs=(default harsh)

# The scenario's topology, LAN topology, link folder, varying trace and
# its stagger (seconds between links), and a title for its plots.
scenario_vars() {
  case $1 in
    default)
      wan_topo=experiments/topologies/default.toml; lan_topo=experiments/topologies/lan.toml
      link_dir=experiments/traces/skyplane-aws3; vary=mahimahi-cellular/TMobile-LTE-driving.down; stagger=0
      title="default: 3 AWS regions x 2 workers, Skyplane links 49-68 Mbit/s, 42-107 ms one-way" ;;
    harsh)
      wan_topo=experiments/topologies/harsh.toml; lan_topo=experiments/topologies/lan5.toml
      link_dir=experiments/traces/skyplane-harsh5; vary=mahimahi-cellular/Verizon-EVDO-driving.down; stagger=37
      title="harsh: 5 AWS regions on 5 continents x 1 worker, 5.7-19.5 Mbit/s, 68-202 ms one-way" ;;
    *) echo "unknown scenario '$1' (default, harsh)" >&2; exit 2 ;;
  esac
}

# Writes the topology of run $2 of scenario $1 to $topos/$2.toml and what
# it is to $results/$2.json (moved into the run folder after the launch).
# Paths inside stay relative to the topology's folder.
make_topology() {
  local scenario=$1 run=$2 out=$topos/$2.toml base mode what
  case $run in
    lan) base=$lan_topo ;;
    *) base=$wan_topo ;;
  esac
  mode=${run%-varying}
  mode=${mode%-sign}
  mode=${mode%-int8}
  mode=${mode%-ds}
  mode=${mode%-nolinks}
  mode=${mode%-stream}
  mode=${mode%-sync}
  sed -e "0,/^name = .*/s//name = \"$scenario-$run\"/" \
      -e "s/^eval_every = .*/eval_every = $eval_every/" \
      -e "s|^trace_dir = .*|trace_dir = \"$(realpath --relative-to="$topos" "$link_dir")\"|" \
      -e "s/^mode = .*/mode = \"$mode\"/" \
      "$base" > "$out"
  local sites workers
  sites=$(grep -c '^\[\[sites\]\]' "$out")
  workers=$(awk -F'= *' '/^workers *=/ {s += $2} END {print s}' "$out")
  case $run in
    lan) what="lan: 1 site x $workers workers, no WAN" ;;
    bsp) what="bsp: every update every clock, fp32, barrier between the sites, SSP 0 inside them" ;;
    all-async) what="all-async: every update every clock, fp32, no bound" ;;
    asp) what="asp: significant updates (value floor 0.03), 4-bit, DS 8 + up to 24 clocks in delivery" ;;
    asp-ds) what="asp: significant updates (value floor 0.03), 4-bit, DS 8 (no delivery allowance)" ;;
    avg) what="avg: models averaged every 10 clocks, fp32" ;;
    diloco) what="diloco: H 50, 4-bit, outer lr 0.7, Nesterov 0.9, one step in flight" ;;
    diloco-sync) what="diloco: H 25, synchronous outer step (the paper's), 4-bit, outer lr 0.7, Nesterov 0.9" ;;
    diloco-int8) what="diloco: H 20, 8-bit, outer lr 0.7, Nesterov 0.9" ;;
    diloco-stream) what="streaming diloco: H 50 in 5 fragments (one every 10 clocks), 4-bit, outer lr 0.7, Nesterov 0.9" ;;
    asp-int8) what="asp, 8-bit values" ;;
    asp-sign) what="asp, 1-bit sign values" ;;
    asp-nolinks) what="asp, every link 1000 Mbit/s and 1 ms (the mode without the WAN's cost)" ;;
    all-async-nolinks) what="all-async, every link 1000 Mbit/s and 1 ms (the mode without the WAN's cost)" ;;
    asp-varying) what="asp, links varying like $(basename "$vary" .down) (outages)" ;;
    bsp-varying) what="bsp, SSP 0 inside the sites, links varying like $(basename "$vary" .down) (outages)" ;;
    *) echo "unknown run '$run'" >&2; return 1 ;;
  esac
  if [[ $mode == asp || $mode == all-async ]] && grep -q '^tie_reports = true' "$out"; then
    what="$what, tied reports"
    if grep -q '^tie_backlog = true' "$out"; then
      local last
      last=$(sed -n 's/^tie_backlog_last_clocks = \([0-9]*\).*/\1/p' "$out")
      if [[ -n $last && $last != 0 ]]; then
        what="$what, what waits counted over the last $last clocks"
      else
        what="$what, what waits counted"
      fi
    fi
  fi
  if [[ $mode == asp ]]; then
    what="$what, $(sed -n 's/^max_inflight_batches = \([0-9]*\).*/\1/p' "$out") in flight"
  fi
  # report_every_clocks is an asp and all-async setting: the other modes
  # take every clock's report (and refuse the key).
  if [[ $mode == asp || $mode == all-async ]]; then
    local every
    every=$(sed -n 's/^report_every_clocks = \([0-9]*\).*/\1/p' "$out")
    if [[ -n $every && $every != 1 ]]; then what="$what, a report every $every clocks"; fi
  else
    sed -i '/^report_every_clocks = /d' "$out"
  fi
  [ "$run" != lan ] && what="$what; $sites sites"
  if [[ $run == *-sign ]]; then sed -i 's/^codec = .*/codec = "sign"/' "$out"; fi
  if [[ $run == *-int8 ]]; then sed -i 's/^codec = .*/codec = "int8"/' "$out"; fi
  # bsp is synchronous inside each site too (staleness 0: every read holds
  # every update of the clock before). With the scenario's SSP 2 inside the
  # sites and the WAN's delay on top, bsp's summed early steps swung from
  # run to run (0.44-0.73 at clock 50 over four default runs, where SSP 0
  # gave 0.76 twice), and a bsp run that misses the target has its bytes
  # to target extrapolated: experiments/results/wan/README.md.
  if [[ $mode == bsp ]]; then sed -i 's/^staleness = [0-9]*/staleness = 0/' "$out"; fi
  if [[ $run == asp-ds ]]; then sed -i 's/^\[wan\]/[wan]\nmax_drift_allowance = 0/' "$out"; fi
  if [[ $run == diloco ]]; then sed -i 's/^\[wan\]/[wan]\naveraging_period = 50/' "$out"; fi
  if [[ $run == diloco-int8 ]]; then sed -i 's/^\[wan\]/[wan]\naveraging_period = 20/' "$out"; fi
  if [[ $run == diloco-sync ]]; then sed -i 's/^\[wan\]/[wan]\naveraging_period = 25\nouter_overlap = false/' "$out"; fi
  if [[ $run == diloco-stream ]]; then sed -i 's/^\[wan\]/[wan]\naveraging_period = 50\nouter_fragments = 5/' "$out"; fi
  if [[ $run == avg ]]; then sed -i 's/^\[wan\]/[wan]\naveraging_period = 10/' "$out"; fi
  if [[ $run == *-nolinks ]]; then
    # The scenario's sites and settings, every link out of the way: what the
    # mode itself (selection, codec, staleness) costs, apart from latency.
    sed -i -e 's/^links = .*/links = "static"/' -e '/^trace_dir = /d' -e '/^skyplane_bandwidth = /d' \
        -e '/^bandwidth_scale = /d' "$out"
    local names a b
    names=$(awk '/^\[\[sites\]\]/ {s = 1; next} s && /^name *=/ {gsub(/"/, "", $3); print $3; s = 0}' "$out")
    for a in $names; do
      for b in $names; do
        [ "$a" = "$b" ] && continue
        printf '\n[[links]]\nsrc = "%s"\ndst = "%s"\nbandwidth_mbps = 1000\ndelay_ms = 1\n' "$a" "$b" >> "$out"
      done
    done
  fi
  if [[ $run == *-varying ]]; then
    if [ ! -f "$traces/$vary" ]; then
      echo "skipping $scenario:$run: no $traces/$vary (set GEOPS_TRACES)" >&2
      rm -f "$out"
      return 1
    fi
    sed -i "s|^time_scale = .*|variation = \"$(realpath --relative-to="$topos" "$traces/$vary")\"\nvariation_bin_s = 0.5\nvariation_stagger_s = $stagger\ntime_scale = 1.0|" "$out"
  fi
  local cap=null
  if [[ $mode == asp ]]; then
    local ds allow
    ds=$(awk -F'= *' '/^staleness_ds *=/ {print $2+0; exit}' "$out")
    allow=$(awk -F'= *' '/^max_drift_allowance *=/ {print $2+0; exit}' "$out")
    cap=$((ds + ${allow:-24}))
  elif [[ $mode == bsp ]]; then
    cap=0
  fi
  printf '{"scenario": "%s", "run": "%s", "what": "%s", "drift_cap": %s}\n' "$scenario" "$run" "$what" "$cap" \
    > "$results/$run.json"
}

for spec in "${specs[@]}"; do
  scenario=${spec%%:*}
  runs_csv=$default_runs
  [[ $spec == *:* ]] && runs_csv=${spec#*:}
  IFS=, read -r -a runs <<< "$runs_csv"
  scenario_vars "$scenario"
  results=experiments/results/wan/$scenario
  topos=$results/topologies
  mkdir -p "$topos"
  echo "$title" > "$results/scenario.txt"
  for run in "${runs[@]}"; do
    make_topology "$scenario" "$run" || continue
    limit=$timeout
    [[ $scenario == harsh && $run == bsp* ]] && limit=$bsp_timeout
    echo "=== $scenario:$run ($(date -u +%H:%M:%S), at most $limit s)"
    rm -rf "${results:?}/$run"
    "$geops" launch "$topos/$run.toml" --out "$results/$run" --replace --plain --timeout "$limit" \
      > "$results/$run.log" 2>&1 || echo "run $scenario:$run exited with $?" >&2
    mkdir -p "$results/$run"
    mv "$results/$run.json" "$results/$run/run.json"
    sed -i "s|$root/||g" "$results/$run.log"  # paths relative to the repository
    tail -n 6 "$results/$run.log"
  done
  # One block per invocation: a partial re-run keeps the record of the runs
  # it did not repeat.
  {
    echo "runs: ${runs[*]}"
    echo "command: bash experiments/run_wan_comparison.sh ${*:-}"
    echo "finished: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -sr)"
    echo "geops: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD -- . ':!experiments/results' 2>/dev/null || echo '+local changes')"
    echo
  } >> "$results/run_info.txt"
done

python=${PYTHON:-python3}
if ! "$python" -c 'import matplotlib' 2>/dev/null && [ -x /usr/bin/python3 ]; then python=/usr/bin/python3; fi
for spec in "${specs[@]}"; do
  "$python" experiments/plot_wan.py "experiments/results/wan/${spec%%:*}"
  find "experiments/results/wan/${spec%%:*}" -type f \( -name '*.log' -o -name '*.jsonl' \) -exec gzip -9nf {} +
  echo "results: experiments/results/wan/${spec%%:*}/results.md"
done
