#!/usr/bin/env bash
# Every thrift/ header that the rest of geops includes (the command, the
# site process, the client library, the Python package and the layers
# below thrift/) must expose geops types only: preprocessing it alone pulls
# in no Thrift header (thrift/... from the system) and no generated one
# (gen-cpp/). Tests and the transport benchmarks may use thrift/'s
# internals.
#
#   thrift_free_headers.sh CXX SOURCE_DIR [extra compiler flags...]
set -euo pipefail
cxx=$1
src=$2
shift 2
cd "$src"
headers=$(grep -rhoE '#include "thrift/[a-z_]+\.h"' \
            cli config metrics certs supervisor site client python/src worker datacenter wan storage common 2>/dev/null |
          sed -E 's/#include "(.*)"/\1/' | sort -u)
if [ -z "$headers" ]; then
  echo "no thrift/ header is included outside thrift/: nothing to check"
  exit 0
fi
bad=0
checked=0
for h in $headers; do
  [ -f "$h" ] || { echo "missing: $h"; bad=1; continue; }
  # -MG: a missing (generated) header is listed rather than an error.
  deps=$(echo "#include \"$h\"" | "$cxx" -std=c++20 -I. "$@" -x c++ -M -MG - 2>&1) || {
    echo "$h does not preprocess on its own:"; echo "$deps" | head -5; bad=1; continue; }
  leaks=$(echo "$deps" | tr ' \\' '\n\n' | grep -E '/include/thrift/|gen-cpp/' | sort -u || true)
  checked=$((checked + 1))
  if [ -n "$leaks" ]; then
    echo "$h pulls in Thrift:"
    echo "$leaks" | head -5 | sed 's/^/  /'
    bad=1
  fi
done
echo "checked $checked thrift/ headers included outside thrift/"
exit $bad
