#!/usr/bin/env bash
# Same-seed repeats: how far one run of a topology is from the next.
#
# The five sites (or the LAN's five workers) run asynchronously, so two
# runs of one topology with one seed do not train the same model: the
# order in which updates meet differs. This runs each topology ROUNDS
# times, alternating (A B C A B C ...), with the seed SEED, and prints, per
# run and as medians with their range, the clock and the seconds at which
# the evaluating site first reached the target, the milliseconds per clock
# up to there, the final accuracy at the lowest site and the drift wait
# (experiments/repeats_table.py), then each median against the first
# topology's.
#
# Usage: bash experiments/run_repeats.sh ROUNDS TOPOLOGY[@GEOPS] [...]
#   TOPOLOGY@GEOPS runs that topology with another geops binary (e.g. one
#   built from the commit before a change, to compare the two side by side
#   in one invocation); its runs are named TOPOLOGY-NAME@BINARY-NAME.
# Environment: GEOPS (default build/cli/geops), SEED (default: each
#   topology's own), TIMEOUT (seconds per run, default 600), TABLE (a
#   markdown file to write; default: print), TITLE (its heading).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:?usage: run_repeats.sh ROUNDS TOPOLOGY [TOPOLOGY ...]}
shift
[ $# -ge 1 ] || { echo "usage: run_repeats.sh ROUNDS TOPOLOGY [TOPOLOGY ...]" >&2; exit 2; }
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "ROUNDS must be a positive number, not '$rounds'" >&2; exit 2; }
[[ -z ${SEED:-} || $SEED =~ ^[0-9]+$ ]] || { echo "SEED must be a whole number, not '$SEED'" >&2; exit 2; }
geops=${GEOPS:-build/cli/geops}
timeout=${TIMEOUT:-600}
runs=$(mktemp -d)
copies=()
trap 'rm -rf "$runs" "${copies[@]}"' EXIT
names=()
binaries=()
for arg in "$@"; do
  topo=$arg
  binary=$geops
  name=$(basename "$topo" .toml)
  if [[ $arg == *@* ]]; then
    topo=${arg%@*}
    binary=${arg##*@}
    [ -x "$binary" ] || { echo "no geops binary $binary (in $arg)" >&2; exit 2; }
    name="$(basename "$topo" .toml)@$(basename "$binary")"
  fi
  [ -f "$topo" ] || { echo "no topology $topo" >&2; exit 2; }
  for n in "${names[@]}"; do
    [ "$n" != "$name" ] || { echo "two topologies named $name: the runs are told apart by file name" >&2; exit 2; }
  done
  # A copy beside the original, so that relative trace folders stay valid.
  copy=$(dirname "$topo")/.repeats.$$.${name//@/.}.toml
  copies+=("$copy")
  if [ -n "${SEED:-}" ]; then
    sed -e "s/^seed = [0-9]*/seed = $SEED/" "$topo" > "$copy"
  else
    cp "$topo" "$copy"
  fi
  names+=("$name")
  binaries+=("$binary")
done
for i in $(seq 1 "$rounds"); do
  for k in "${!names[@]}"; do
    echo "=== ${names[$k]} #$i ($(date -u +%H:%M:%S))" >&2
    "${binaries[$k]}" launch "${copies[$k]}" --out "$runs/${names[$k]}-$i" --plain --timeout "$timeout" \
      > "$runs/${names[$k]}-$i.log" 2>&1 || echo "${names[$k]} #$i exited with $?" >&2
  done
done
{
  echo "# ${TITLE:-Same-seed repeats}"
  echo
  echo "command: ${SEED:+SEED=$SEED }bash experiments/run_repeats.sh $rounds $*"
  echo "finished: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -sr)"
  echo "geops: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD -- . ':!experiments/results' 2>/dev/null || echo '+local changes')"
  echo
  python3 experiments/repeats_table.py "$runs" "$rounds" "${names[@]}"
} > "${TABLE:-/dev/stdout}"
