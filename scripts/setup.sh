#!/usr/bin/env bash
# Installs every Debian 12 package geops needs to build, test and run.
# Safe to re-run: apt-get skips what is already installed, and the package
# index is refreshed only when it is missing or older than a day.
set -euo pipefail

packages=(
  build-essential cmake pkg-config ninja-build
  clang libclang-rt-14-dev
  libthrift-dev thrift-compiler libboost-dev
  librocksdb-dev libuv1-dev liblz4-dev zlib1g-dev libssl-dev
  libopenblas-dev
  googletest libgtest-dev libgmock-dev libbenchmark-dev
  libspdlog-dev libfmt-dev libcli11-dev libtomlplusplus-dev nlohmann-json3-dev prometheus-cpp-dev libmicrohttpd-dev
  dataset-fashion-mnist jargon-text
  python3 python3-matplotlib
  prometheus  # the server the metrics test scrapes a three-site run with
  python3-dev pybind11-dev python3-numpy python3-torch python3-pytest
  python3-venv python3-pip python3-setuptools python3-wheel  # pip install ./python, offline
  python3-torchvision  # the examples' and users' vision models (resnet18 and friends)
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

# The offline schema validator of the Kubernetes manifests
# (deploy/k8s/validate: kubernetes-models from npm's registry). Debian's
# nodejs and npm when the machine has no npm yet.
k8s_validator() {
  local dir
  dir="$(cd "$(dirname "$0")/.." && pwd)/deploy/k8s/validate"
  if [ -d "$dir/node_modules/kubernetes-models" ]; then return 0; fi
  if ! command -v npm > /dev/null; then
    DEBIAN_FRONTEND=noninteractive ${SUDO:-} apt-get install -y -q --no-install-recommends nodejs npm
  fi
  (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error) ||
    echo "setup: npm could not install the manifest validator; its test will skip" >&2
}

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages already installed"
  k8s_validator
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

stamp=/var/lib/apt/periodic/update-success-stamp
lists_present=$(find /var/lib/apt/lists -maxdepth 1 -name '*Packages*' 2>/dev/null | head -n 1)
if [ -z "$lists_present" ] || [ ! -f "$stamp" ] || [ -n "$(find "$stamp" -mmin +1440 2>/dev/null)" ]; then
  $SUDO apt-get update -q
  $SUDO mkdir -p "$(dirname "$stamp")" && $SUDO touch "$stamp"
fi
echo "setup: installing ${missing[*]}"
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
k8s_validator
