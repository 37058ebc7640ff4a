#!/usr/bin/env bash
# Side-by-side CPU cost of two geops builds (or two settings) on one
# topology: runs A and B alternately, ROUNDS times each, and prints one
# markdown table: per run, the seconds to the target accuracy, the wall
# time, the shard and worker CPU seconds per 1000 clocks (summary.json
# cpu_seconds, summed over every process of every site), WAN MB and the
# final accuracy; then the medians and the ratio B / A of each median.
#
# Usage:
#   A=old/geops B=build/cli/geops bash experiments/run_cpu_ab.sh TOPOLOGY [ROUNDS]
#   A_SED='s/^backlog_revisit = .*//' bash experiments/run_cpu_ab.sh TOPOLOGY [ROUNDS]
# A and B default to build/cli/geops; A_SED and B_SED (sed scripts) edit
# the topology for that side. ROUNDS defaults to 3. Each run's launch
# folder is kept under $KEEP when set (else in a temporary folder).
set -euo pipefail
cd "$(dirname "$0")/.."
topo=${1:?usage: run_cpu_ab.sh TOPOLOGY [ROUNDS]}
rounds=${2:-3}
a_bin=${A:-build/cli/geops}
b_bin=${B:-build/cli/geops}
work=$(mktemp -d)
# Relative trace folders stay valid from the edited copies' folder.
topo_dir=$(cd "$(dirname "$topo")" && pwd)
trap 'rm -rf "$work" "$topo_dir/.cpu_ab_a.$$.toml" "$topo_dir/.cpu_ab_b.$$.toml"' EXIT
keep=${KEEP:-$work}
mkdir -p "$keep"
for side in a b; do
  script=A_SED
  [ "$side" = b ] && script=B_SED
  sed -e "${!script:-}" "$topo" > "$topo_dir/.cpu_ab_$side.$$.toml"
done
for i in $(seq 1 "$rounds"); do
  for side in a b; do
    bin=$a_bin
    [ "$side" = b ] && bin=$b_bin
    "$bin" launch "$topo_dir/.cpu_ab_$side.$$.toml" --out "$keep/$side-$i" --plain --timeout 900 \
      > "$keep/$side-$i.log" 2>&1 || echo "run $side-$i failed: see $keep/$side-$i.log" >&2
  done
done
python3 - "$keep" "$rounds" << 'EOF'
import json, statistics, sys
keep, rounds = sys.argv[1], int(sys.argv[2])
rows = {"a": [], "b": []}
print("| run | s to target | wall s | shard CPU s / 1000 clocks | worker CPU s / 1000 clocks | WAN MB | final accuracy |")
print("|---|---|---|---|---|---|---|")
for i in range(1, rounds + 1):
    for side in "ab":
        try:
            s = json.load(open(f"{keep}/{side}-{i}/summary.json"))
        except (OSError, ValueError):
            print(f"| {side.upper()}{i} | failed | | | | | |")
            continue
        k = s["clocks"] / 1000.0
        cpu = s.get("cpu_seconds") or {}
        r = [s.get("time_to_target_seconds"), s.get("wall_seconds"),
             cpu.get("shards") / k if cpu.get("shards") is not None else None,
             cpu.get("workers") / k if cpu.get("workers") is not None else None,
             s.get("wan_bytes", 0) / 1e6, s.get("test_accuracy")]
        rows[side].append(r)
        cells = ["-" if v is None else (f"{v:.4f}" if j == 5 else f"{v:.1f}") for j, v in enumerate(r)]
        print(f"| {side.upper()}{i} | " + " | ".join(cells) + " |")
med = {}
for side in "ab":
    med[side] = []
    for j in range(6):
        vals = [r[j] for r in rows[side] if r[j] is not None]
        med[side].append(statistics.median(vals) if vals else None)
for side in "ab":
    cells = ["-" if v is None else (f"{v:.4f}" if j == 5 else f"{v:.1f}") for j, v in enumerate(med[side])]
    print(f"| median {side.upper()} | " + " | ".join(cells) + " |")
ratio = ["-" if (x is None or y is None or x == 0 or j == 5) else f"{y / x:.2f}x"
         for j, (x, y) in enumerate(zip(med["a"], med["b"]))]
print("| B / A | " + " | ".join(ratio) + " |")
EOF
