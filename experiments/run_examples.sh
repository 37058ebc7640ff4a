#!/usr/bin/env bash
# Runs the two example workloads of examples/ through geops and their
# references, and writes experiments/results/examples/results.md:
#   fmnist-lan     the Fashion-MNIST CNN, three workers in one site (LAN)
#   fmnist-three   the same CNN, three sites of one worker over the default links
#   bytelm-base    the byte-level transformer, plain PyTorch in one process
#   bytelm-three   the same transformer through three sites, equal examples
# Each geops run is one `geops launch` of the example's topology; its folder
# under experiments/results/examples/ keeps summary.json, events and logs;
# once the table is written the raw logs and event logs there (*.log,
# *.jsonl) are gzipped in place, as they are committed, and the summary
# reads either form.
#
# Usage: bash experiments/run_examples.sh [RUN ...]   (default: all four)
# Environment: GEOPS (default build/cli/geops), TIMEOUT (seconds per run).
set -euo pipefail
cd "$(dirname "$0")/.."
geops=${GEOPS:-build/cli/geops}
timeout=${TIMEOUT:-2400}
results=experiments/results/examples
mkdir -p "$results"
runs=("$@")
[ ${#runs[@]} -eq 0 ] && runs=(fmnist-lan fmnist-three bytelm-base bytelm-three)
[ -x "$geops" ] || bash scripts/build.sh geops geops_python

launch() {  # launch NAME TOPOLOGY
  rm -rf "${results:?}/$1"
  "$geops" launch "$2" --out "$results/$1" --replace --plain --timeout "$timeout" > "$results/$1.log" 2>&1
}

for run in "${runs[@]}"; do
  echo "== $run"
  case $run in
    fmnist-lan) launch "$run" examples/fashion_mnist_cnn/one_site.toml ;;
    fmnist-three) launch "$run" examples/fashion_mnist_cnn/three_sites.toml ;;
    bytelm-base) /usr/bin/python3 examples/byte_transformer/baseline.py --steps 600 --batch-size 15 > "$results/$run.log" 2>&1 ;;
    bytelm-three) launch "$run" examples/byte_transformer/three_sites.toml ;;
    *) echo "unknown run $run" >&2; exit 2 ;;
  esac
done
if [ -f "$results/fmnist-lan/summary.json" ] && [ -f "$results/fmnist-three/summary.json" ]; then
  # The WAN comparison's plots, for the CNN pair (lan = one site, asp = three).
  plots=$(mktemp -d)
  ln -s "$PWD/$results/fmnist-lan" "$plots/lan"
  ln -s "$PWD/$results/fmnist-three" "$plots/asp"
  /usr/bin/python3 experiments/plot_wan.py "$plots" > /dev/null
  mkdir -p "$results/plots"
  cp "$plots"/*.png "$results/plots/"
  rm -rf "$plots"
fi
/usr/bin/python3 experiments/summarize_examples.py "$results" > "$results/results.md"
find "$results" -type f \( -name '*.log' -o -name '*.jsonl' \) -exec gzip -9nf {} +
cat "$results/results.md"
