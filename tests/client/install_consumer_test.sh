#!/usr/bin/env bash
# The C++ client library as an application gets it: installs this build into
# a fresh prefix (cmake --install), builds tests/install_consumer/ against it
# with find_package(geops), starts a real `geops site` (one shard on a port
# the kernel picks, a topology of workload "client" with two workers) and
# runs the consumer against it; the consumer trains and checks the result.
#
#   install_consumer_test.sh BUILD_DIR SOURCE_DIR GEOPS_BIN WORK_DIR GENERATOR MAKE_PROGRAM CXX_COMPILER
#
# Every step is bounded by `timeout`; the only process it stops is the site
# it started, by its PID (and the site ends by itself if this script dies).
# Exits non-zero, naming the step, on any failure.
set -euo pipefail

if [[ $# -ne 7 ]]; then
  echo "usage: $0 BUILD_DIR SOURCE_DIR GEOPS_BIN WORK_DIR GENERATOR MAKE_PROGRAM CXX_COMPILER" >&2
  exit 2
fi
build=$1 source=$2 geops=$3 work=$4 generator=$5 make_program=$6 cxx=$7
prefix=$work/prefix
site_pid=""

fail() {
  echo "FAILED: $*" >&2
  exit 1
}

# Stops the site (SIGTERM, SIGKILL after 10 s) and prints its exit status.
stop_site() {
  [[ -n $site_pid ]] || return 0
  local pid=$site_pid
  site_pid=""
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 100); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    echo "site did not stop on SIGTERM within 10 s" >&2
    return 1
  fi
  local rc=0
  wait "$pid" || rc=$?
  return "$rc"
}
trap 'stop_site >/dev/null 2>&1 || true' EXIT

rm -rf "$work"
mkdir -p "$work"

echo "== install into $prefix"
timeout 60 cmake --install "$build" --prefix "$prefix" >"$work/install.log" 2>&1 ||
  { cat "$work/install.log" >&2; fail "cmake --install"; }
for f in include/geops/geops.h include/geops/client.h include/geops/error.h include/geops/options.h \
         lib/cmake/geops/geopsConfig.cmake lib/cmake/geops/geopsConfigVersion.cmake \
         lib/cmake/geops/geopsTargets.cmake lib/libgeops_client.so; do
  [[ -e $prefix/$f ]] || fail "the install lacks $f"
done
# The public headers stand alone: nothing but include/geops/ is installed.
[[ $(ls "$prefix/include") == geops ]] || fail "the install has headers outside include/geops/"

echo "== configure and build the consumer"
timeout 120 cmake -S "$source/tests/install_consumer" -B "$work/consumer" -G "$generator" \
  -DCMAKE_MAKE_PROGRAM="$make_program" -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF >"$work/configure.log" 2>&1 ||
  { cat "$work/configure.log" >&2; fail "configuring the consumer"; }
found=$(sed -n 's/^geops_DIR:PATH=//p' "$work/consumer/CMakeCache.txt")
[[ $found == "$prefix/lib/cmake/geops" ]] || fail "find_package(geops) found '$found', not the install"
timeout 120 cmake --build "$work/consumer" >"$work/build.log" 2>&1 ||
  { cat "$work/build.log" >&2; fail "building the consumer"; }

echo "== start the site"
topology=$work/topology.toml
cat >"$topology" <<'TOML'
name = "install-consumer"
[model]
workload = "client"
chunk_kib = 1
[training]
clocks = 40
staleness = 0
worker_lease_ms = 10000
rpc_timeout_ms = 5000
[[sites]]
name = "local"
host = "127.0.0.1"
shards = 1
workers = 2
TOML
# The site's stdin is a FIFO whose only writer is this script (fd 3): with
# --exit-with-parent the site ends by itself if this script is killed.
mkfifo "$work/site.stdin"
exec 3<>"$work/site.stdin"
"$geops" site --topology "$topology" --site local --shard 0 --port 0 --exit-with-parent \
  <"$work/site.stdin" >"$work/site.log" 2>&1 3>&- &
site_pid=$!
# The shard announces its address in its `listening` event line:
#   @geops {"address":"127.0.0.1:40123","event":"listening",...}
address=""
for _ in $(seq 300); do
  address=$(sed -n '/^@geops {.*"event":"listening"/s/.*"address":"\([^"]*\)".*/\1/p' "$work/site.log" | head -n 1)
  [[ -n $address ]] && break
  kill -0 "$site_pid" 2>/dev/null || { cat "$work/site.log" >&2; fail "the site exited before listening"; }
  sleep 0.1
done
[[ -n $address ]] || { cat "$work/site.log" >&2; fail "the site did not listen within 30 s"; }
echo "site shard 0 at $address"

echo "== run the consumer"
if ! timeout 60 "$work/consumer/install_consumer" "$topology" "$address" 3>&-; then
  echo "--- site log" >&2
  cat "$work/site.log" >&2
  fail "the consumer"
fi

echo "== stop the site"
stop_site || { cat "$work/site.log" >&2; fail "the site did not stop cleanly"; }
echo "PASSED"
