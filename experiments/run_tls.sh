#!/usr/bin/env bash
# What mutual TLS costs a real training run: the main job
# (experiments/topologies/default.toml: three sites, ASP over Skyplane
# links) launched ROUNDS times in plaintext and ROUNDS times with
# `[security] certs` set, alternating plain and TLS so that both see the
# same machine load. Every LAN and WAN connection of the TLS runs is
# TLS 1.3 with a certificate on both sides, made by `geops certs`.
#
# Writes under experiments/results/tls/: one launch folder per run
# (plain-1, tls-1, ...), their logs, and results.md (per-run table, medians,
# TLS/plain ratios, command, date, machine). The raw logs and event logs
# (*.log, *.jsonl) are gzipped in place at the end, as they are committed.
#
# Usage: bash experiments/run_tls.sh
# Environment: GEOPS (default build/cli/geops), ROUNDS (default 3),
#   TIMEOUT (seconds per run, default 900).
set -euo pipefail
cd "$(dirname "$0")/.."
geops=${GEOPS:-build/cli/geops}
rounds=${ROUNDS:-3}
timeout=${TIMEOUT:-900}
results=experiments/results/tls
topos=$results/topologies
rm -rf "$results"
mkdir -p "$topos"

# Both topologies are the default one, with the trace folder made relative
# to where they are written. The TLS one names a certificate folder that
# `geops certs` fills for exactly its sites and workers (kept out of the
# repository: keys are secrets even in an experiment).
trace_dir=$(realpath --relative-to="$topos" experiments/traces/skyplane-aws3)
sed -e "0,/^name = .*/s//name = \"plain\"/" \
    -e "s|^trace_dir = .*|trace_dir = \"$trace_dir\"|" \
    experiments/topologies/default.toml > "$topos/plain.toml"
sed -e "0,/^name = .*/s//name = \"tls\"/" "$topos/plain.toml" > "$topos/tls.toml"
certs=$(mktemp -d)
trap 'rm -rf "$certs"' EXIT
printf '\n[security]\ncerts = "%s"\n' "$certs" >> "$topos/tls.toml"
"$geops" certs "$topos/tls.toml" --out "$certs" --force > /dev/null

for round in $(seq 1 "$rounds"); do
  for kind in plain tls; do
    run=$kind-$round
    echo "=== $run ($(date -u +%H:%M:%S))"
    "$geops" launch "$topos/$kind.toml" --out "$results/$run" --replace --plain --timeout "$timeout" \
      > "$results/$run.log" 2>&1 || echo "run $run exited with $?" >&2
    head -n 1 "$results/$run.log"
    tail -n 5 "$results/$run.log"
  done
done
# The logs name where this checkout and the temporary certificates were:
# the record keeps them relative.
find "$results" -name '*.log' -exec sed -i -e "s|$(pwd)/||g" -e "s|$certs|<certs>|g" {} +
# The certificate folder is temporary: the committed topology names it only
# as a placeholder.
sed -i "s|^certs = .*|certs = \"certs\"  # bash experiments/run_tls.sh makes them|" "$topos/tls.toml"

python3 - "$results" "$rounds" <<'EOF'
import json, os, statistics, sys
results, rounds = sys.argv[1], int(sys.argv[2])
rows, by_kind = [], {"plain": [], "tls": []}
for r in range(1, rounds + 1):
    for kind in ("plain", "tls"):
        path = os.path.join(results, f"{kind}-{r}", "summary.json")
        if not os.path.exists(path):
            rows.append(f"| {kind}-{r} | no summary | | | | | |")
            continue
        s = json.load(open(path))
        s["wan_bytes_per_clock"] = s["wan_bytes"] / s["clocks"]
        by_kind[kind].append(s)
        ttt = s.get("time_to_target_seconds")
        rows.append(
            f"| {kind}-{r} | {s['exit']} | {s['test_accuracy']:.4f} | {s['wall_seconds']:.1f} | "
            f"{'-' if ttt is None else f'{ttt:.1f}'} | {s['examples_per_second']:.0f} | "
            f"{s['wan_bytes'] / 1e6:.2f} |")

def med(kind, key):
    vals = [s[key] for s in by_kind[kind] if s.get(key) is not None]
    return statistics.median(vals) if vals else float("nan")

out = ["| run | exit | test accuracy | wall s | s to 0.85 | examples/s | WAN MB (geops bytes) |",
       "|---|---|---|---|---|---|---|", *rows, "",
       "| median | plain | TLS | TLS / plain |", "|---|---|---|---|"]
for key, label in (("wall_seconds", "wall s"), ("time_to_target_seconds", "s to 0.85"),
                   ("examples_per_second", "examples/s"), ("test_accuracy", "test accuracy"),
                   ("wan_bytes", "WAN bytes"), ("wan_bytes_per_clock", "WAN bytes per clock (6 links)"),
                   ("lan_bytes", "LAN bytes")):
    p, t = med("plain", key), med("tls", key)
    out.append(f"| {label} | {p:.4g} | {t:.4g} | {t / p:.3f} |")
open(os.path.join(results, "table.md"), "w").write("\n".join(out) + "\n")
print("\n".join(out))
EOF
{
  echo "# Mutual TLS on the main job"
  echo
  echo "command: bash experiments/run_tls.sh (ROUNDS=$rounds)"
  echo "finished: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -sr)"
  echo "geops: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD -- . ':!experiments/results' 2>/dev/null || echo '+local changes')"
  echo
  cat "$results/table.md"
  cat <<'TEXT'

Byte counts are what geops hands to the socket (plaintext, or the
plaintext under TLS); TLS adds about 22 bytes per record of up to 16 KiB
(about 0.1%) and a handshake per connection. WAN bytes differ between
plain and TLS runs because ASP ships what crossed the threshold when a
link is free: a slower run coalesces differently, not more per update.

Every process of a run shares this machine's cores, and the main job
moves about 18 GiB over the LAN (each worker pushes and pulls the whole
2.1 MB model every clock), so under TLS about 36 GiB are encrypted or
decrypted on the same cores that train: that, not the WAN, is the cost
measured here (experiments/results/tls_cost.md measures the LAN data
plane alone).
TEXT
} > "$results/results.md"
rm "$results/table.md"
# The raw logs and event logs are kept gzipped (the table reads summary.json).
find "$results" -type f \( -name '*.log' -o -name '*.jsonl' \) -exec gzip -9nf {} +
echo "results: $results/results.md"
