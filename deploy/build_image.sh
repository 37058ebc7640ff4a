#!/usr/bin/env bash
# Builds the geops container image from deploy/Dockerfile with buildah
# (Debian `buildah`; no daemon), from a clean clone of this repository, so
# only committed files go in. Where no container registry can be reached,
# `--bootstrap` first makes the `debian:12` base image itself with
# debootstrap (Debian `debootstrap`, from the Debian mirror that apt uses).
#
# Then checks the image: `geops --help`, and with --run-main the main job
# (three sites training Fashion-MNIST, `geops launch`) inside it.
#
# Usage: bash deploy/build_image.sh [--bootstrap] [--run-main] [--tag TAG]
# Needs root (buildah with chroot isolation and the vfs storage driver, which
# work without a container runtime or overlay support). Re-runnable: the
# base image is made only when missing; the image is rebuilt every time.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
tag=localhost/geops:latest
bootstrap=0
run_main=0
while [ $# -gt 0 ]; do
  case $1 in
    --bootstrap) bootstrap=1 ;;
    --run-main) run_main=1 ;;
    --tag) tag=$2; shift ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
[ "$(id -u)" -eq 0 ] || { echo "build_image.sh needs root (buildah, debootstrap)" >&2; exit 2; }
# vfs: no overlay filesystem needed (slower, and larger on disk).
bah() { buildah --storage-driver vfs "$@"; }
need=(buildah)
[ "$bootstrap" = 1 ] && need+=(debootstrap)
for c in "${need[@]}"; do
  command -v "$c" > /dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$c" > /dev/null
done

work=$(mktemp -d)
ctrs=()
cleanup() {
  for c in "${ctrs[@]}"; do bah rm "$c" > /dev/null 2>&1 || true; done
  rm -rf "$work"
}
trap cleanup EXIT

base=docker.io/library/debian:12
if ! bah inspect --type image "$base" > /dev/null 2>&1; then
  [ "$bootstrap" = 1 ] || { echo "no $base image here; pull it, or pass --bootstrap to make it" >&2; exit 2; }
  echo "making $base with debootstrap (bookworm, minbase)..."
  debootstrap --variant=minbase bookworm "$work/rootfs" http://deb.debian.org/debian > "$work/debootstrap.log" 2>&1 \
    || { tail -n 20 "$work/debootstrap.log" >&2; exit 1; }
  c=$(bah from scratch); ctrs+=("$c")
  mnt=$(bah mount "$c")
  cp -a "$work/rootfs/." "$mnt/"
  bah umount "$c" > /dev/null
  bah config --cmd /bin/bash "$c"
  bah commit -q "$c" "$base" > /dev/null
  rm -rf "$work/rootfs"
fi

git clone -q "$root" "$work/src"
echo "building $tag from deploy/Dockerfile (setup.sh and the geops build run inside; several minutes)..."
start=$(date +%s)
bah bud --isolation chroot --pull=never -f deploy/Dockerfile -t "$tag" "$work/src" > "$work/bud.log" 2>&1 \
  || { tail -n 30 "$work/bud.log" >&2; exit 1; }
echo "built in $(( $(date +%s) - start )) s: $(bah images --format '{{.Name}}:{{.Tag}} {{.Size}}' "$tag")"

c=$(bah from "$tag"); ctrs+=("$c")
bah run --isolation chroot "$c" -- geops --help | head -n 3
if [ "$run_main" = 1 ]; then
  echo "the main job inside the image..."
  bah run --isolation chroot "$c" -- bash -c \
    'cd /opt/geops && geops launch experiments/topologies/default.toml --out /tmp/main --plain > /tmp/main.log 2>&1;
     rc=$?; tail -n 5 /tmp/main.log; python3 -c "
import json; s = json.load(open(\"/tmp/main/summary.json\"))
print(\"test accuracy per site:\", s.get(\"test_accuracy\"), \" time to target s:\", s.get(\"time_to_target_seconds\"))"
     exit $rc'
fi
