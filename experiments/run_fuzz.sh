#!/usr/bin/env bash
# Fuzzes what geops reads from the network with libFuzzer (Clang, with
# AddressSanitizer and UndefinedBehaviorSanitizer):
#   fuzz_batch_decoder  WAN batches (wan/codec/codec.h)
#   fuzz_thrift_frame   one frame on a LAN or mirror port, through the bounded
#                       protocol into the generated processors
# Builds them in build-fuzz/ (clang++, -DGEOPS_FUZZ=ON), seeds each corpus
# with real messages made by geops' own encoders (the replay builds of the
# same targets in build/, `--write_seeds`), and runs both side by side.
#
# Usage: bash experiments/run_fuzz.sh [--seconds N | --runs N]
#   --seconds N  each target fuzzes N seconds (default 600) and the figures
#                go to experiments/results/fuzz.md (the benchmark);
#   --runs N     each target runs N inputs and nothing is written (the
#                fixed-count run of scripts/test.sh).
# Exits non-zero when a target crashes; the crashing input is kept in
# build-fuzz/artifacts/ and its name printed.
# Needs: clang and libclang-rt-14-dev (scripts/setup.sh), and build/ built.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=seconds
amount=600
case "${1:-}" in
  --seconds) amount=$2 ;;
  --runs) mode=runs; amount=$2 ;;
  "") ;;
  *) echo "usage: bash experiments/run_fuzz.sh [--seconds N | --runs N]" >&2; exit 2 ;;
esac
targets=(batch_decoder thrift_frame)
for t in "${targets[@]}"; do
  [ -x "build/tests/fuzz/fuzz_$t" ] || { echo "run_fuzz: build/tests/fuzz/fuzz_$t is missing (bash scripts/build.sh)" >&2; exit 1; }
done

if [ ! -f build-fuzz/CMakeCache.txt ]; then
  cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DGEOPS_FUZZ=ON -DGEOPS_ENABLE_CUDA=OFF \
    -DGEOPS_BUILD_TESTS=OFF -DGEOPS_BUILD_BENCHMARKS=OFF -DGEOPS_BUILD_PYTHON=OFF >/dev/null
fi
cmake --build build-fuzz -j "$(nproc)" --target "${targets[@]/#/fuzz_}" >/dev/null

mkdir -p build-fuzz/artifacts
pids=()
for t in "${targets[@]}"; do
  corpus=build-fuzz/corpus/$t
  mkdir -p "$corpus"
  "build/tests/fuzz/fuzz_$t" --write_seeds="$corpus" >/dev/null
  if [ "$mode" = runs ]; then limit=(-runs="$amount"); else limit=(-max_total_time="$amount"); fi
  "build-fuzz/tests/fuzz/fuzz_$t" "${limit[@]}" -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="build-fuzz/artifacts/$t-" "$corpus" >"build-fuzz/$t.log" 2>&1 &
  pids+=($!)
done
failed=0
for i in "${!targets[@]}"; do
  if ! wait "${pids[$i]}"; then
    failed=$((failed + 1))
    echo "run_fuzz: ${targets[$i]} FAILED:" >&2
    grep -E "ERROR|SUMMARY|Test unit written" "build-fuzz/${targets[$i]}.log" >&2 || tail -20 "build-fuzz/${targets[$i]}.log" >&2
  fi
done

# One line per target from libFuzzer's final stats.
summary() {
  local t=$1 log=build-fuzz/$1.log
  local runs cov ft corpus
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -1 | cut -d' ' -f2)
  ft=$(grep -oE 'ft: [0-9]+' "$log" | tail -1 | cut -d' ' -f2)
  corpus=$(ls "build-fuzz/corpus/$t" | wc -l)
  echo "| fuzz_$t | ${runs:-?} | ${cov:-?} | ${ft:-?} | $corpus | $(ls build-fuzz/artifacts | grep -c "^$t-" || true) |"
}
table=$(for t in "${targets[@]}"; do summary "$t"; done)
echo "| target | inputs run | edges covered | features | corpus files | crashes |"
echo "|---|---|---|---|---|---|"
echo "$table"

if [ "$mode" = seconds ]; then
  {
    echo "# Fuzzing: libFuzzer on what geops reads from the network"
    echo
    echo "command: bash experiments/run_fuzz.sh --seconds $amount"
    echo "finished: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(uname -sr), $(clang++ --version | head -1)"
    echo "geops: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD -- . ':!experiments/results' 2>/dev/null || echo '+local changes')"
    echo
    echo "Both targets ran side by side, $amount s each, with AddressSanitizer and"
    echo "UndefinedBehaviorSanitizer, from seeds made by geops' own encoders."
    echo
    echo "| target | inputs run | edges covered | features | corpus files | crashes |"
    echo "|---|---|---|---|---|---|"
    echo "$table"
    cat <<'TEXT'

- **inputs run**: inputs libFuzzer executed, each decoded whole.
- **edges covered**: control-flow edges of the instrumented code (geops and
  its generated Thrift code, not the Thrift library) reached at least once;
  **features** adds libFuzzer's finer signals (edge counts, comparisons).
- **crashes**: inputs that made a sanitizer fire, the process abort (the
  batch target aborts when an accepted batch breaks a promise the receiver
  relies on) or exceed 2 GiB; each would be kept in `build-fuzz/artifacts/`.
- The corpus grows from run to run in `build-fuzz/corpus/` (not committed).
TEXT
  } >experiments/results/fuzz.md
  echo "results: experiments/results/fuzz.md"
fi
[ "$failed" -eq 0 ] || exit 1
