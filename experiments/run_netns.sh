#!/usr/bin/env bash
# Sites on separate hosts, emulated with Linux network namespaces: every site
# of a topology gets its own namespace with its own address (10.77.0.N/24 on
# a veth pair into a bridge that lives in a switch namespace), and its shards
# and workers run there with exactly the command lines an operator would use
# on real hosts (`geops site`, `geops worker`, fixed ports from the topology,
# mutual TLS with certificates from `geops certs`), no launcher.
#
# The kernel shapes the rate: in each site's namespace an htb qdisc gives
# every peer site a class at the link's rate (`geops trace show`, the
# per-shard share), chosen by destination address. geops' own shaper adds
# the one-way delay and the outages (`[wan] kernel_rate = true`).
#
# Needs root (ip netns, tc). Creates only namespaces named geopsNNNN-* (NNNN
# = this script's PID) and removes them, and the processes it started (by
# PID), on exit, with the certificates it made for the run.
#
# Usage: bash experiments/run_netns.sh [--counter] [--clocks N] [--out DIR] [TOPOLOGY]
#   TOPOLOGY   default experiments/topologies/default.toml (hosts, ports and
#              [security] are replaced)
#   --counter  the counter workload instead of the topology's model (exact
#              end state checked at every site: the test's mode)
#   --clocks N override [training] clocks
#   --eval-every N  override [training] eval_every
#   --compare-loopback  afterwards run the same topology through
#              `geops launch` on loopback (geops shaping rate and delay) and
#              compare time to 0.85
#   --link-seconds S, --link-probes N  the bulk stream's length and the
#              number of idle-link probes per link (3 s, 20)
#   --link-modes "M ..."  which measurements per link (default all three):
#              kernel (kernel rate, 8 batches in flight), kernel1 (the same,
#              one batch per round trip), geops (geops' shaper, loopback)
#   --links-only  measure the links only (both measurements below), no
#              training; results default to experiments/results/netns/links
#   --out DIR  results (default experiments/results/netns)
# Prints, per directed link, the rate a bulk TCP transfer achieved between
# the namespaces against the link's rate, and the run's outcome; writes
# DIR/results.json (logs/, metrics/ and the loopback run's folder keep
# their raw logs gzipped: *.log.gz, *.jsonl.gz). Then, per directed link,
# the delay and rate geops' own WAN path gets
# (experiments/bench/link_fidelity.cc: batches through ShapedTransport and
# a Thrift mirror connection), once between the
# namespaces with the kernel's rate (as the sites run) and once on loopback
# with geops' shaper doing rate and delay, the same link of the same
# topology: DIR/links.json and DIR/links.md.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
geops=${GEOPS:-$root/build/cli/geops}
fidelity_bin=${LINK_FIDELITY:-$(dirname "$geops")/../experiments/bench/link_fidelity}
topo_in=experiments/topologies/default.toml
out=experiments/results/netns
counter=0
clocks=""
eval_every=""
loopback=0
links_only=0
link_seconds=3
link_probes=20
link_modes="kernel kernel1 geops"
out_set=0
while [ $# -gt 0 ]; do
  case $1 in
    --counter) counter=1 ;;
    --clocks) clocks=$2; shift ;;
    --eval-every) eval_every=$2; shift ;;
    --compare-loopback) loopback=1 ;;
    --links-only) links_only=1 ;;
    --link-seconds) link_seconds=$2; shift ;;
    --link-probes) link_probes=$2; shift ;;
    --link-modes) link_modes=$2; shift ;;
    --out) out=$2; out_set=1; shift ;;
    -*) echo "unknown flag $1" >&2; exit 2 ;;
    *) topo_in=$1 ;;
  esac
  shift
done
if [ "$links_only" = 1 ] && [ "$out_set" = 0 ]; then out=experiments/results/netns/links; fi
if [ "$(id -u)" -ne 0 ]; then echo "run_netns.sh needs root (ip netns, tc)" >&2; exit 2; fi
command -v ip > /dev/null && command -v tc > /dev/null || { echo "needs iproute2 (ip, tc)" >&2; exit 2; }
[ -x "$geops" ] || { echo "no geops binary at $geops (build first)" >&2; exit 2; }
if [ ! -x "$fidelity_bin" ]; then
  [ "$links_only" = 1 ] && { echo "no link_fidelity at $fidelity_bin (ninja -C build link_fidelity, or LINK_FIDELITY=)" >&2; exit 2; }
  echo "no link_fidelity at $fidelity_bin: geops' WAN path per link is not measured (a build with benchmarks has it)"
  fidelity_bin=""
fi

p=geops$$
sw=$p-sw
pids=()
nss=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2> /dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2> /dev/null || true; done
  for ns in "${nss[@]}"; do ip netns del "$ns" 2> /dev/null || true; done
  # The run's CA and keys served this run only: they do not stay behind.
  [ -n "${out:-}" ] && rm -rf "$out/certs"
}
trap cleanup EXIT
trap "exit 1" TERM INT

rm -rf "$out"
mkdir -p "$out/logs"
out=$(realpath "$out")
topo=$out/topology.toml

# The topology with each site on its own address and fixed ports.
mapfile -t sites < <(awk '/^\[\[sites\]\]/ {s=1} s && /^name *=/ {gsub(/.*= *"|".*/, ""); print; s=0}' "$topo_in")
n=${#sites[@]}
[ "$n" -ge 2 ] || { echo "$topo_in: needs two or more sites" >&2; exit 2; }
awk -v n="$n" '
  /^\[\[sites\]\]/ { site++ }
  /^host *=/ && site { print "host = \"10.77.0." site "\""; next }
  /^base_port *=/ && site { print "base_port = 7000"; next }
  /^metrics_base_port *=/ { next }
  /^name *=/ && site { print; print "metrics_base_port = 9100"; next }
  /^trace_dir *=/ { print; next }
  { print }
' "$topo_in" > "$topo"
# Relative trace paths were relative to the original file.
trace_dir=$(awk -F'"' '/^trace_dir *=/ {print $2; exit}' "$topo_in")
if [ -n "$trace_dir" ] && [[ $trace_dir != /* ]]; then
  sed -i "s|^trace_dir = .*|trace_dir = \"$(realpath "$(dirname "$topo_in")/$trace_dir")\"|" "$topo"
fi
sed -i 's/^\[wan\]/[wan]\nkernel_rate = true/' "$topo"
if [ "$counter" = 1 ]; then
  sed -i -e 's/^workload = .*/workload = "counter"/' -e 's/^layers = .*/layers = [784, 64, 10]/' \
         -e 's/^eval_every = .*/eval_every = 0/' "$topo"
fi
[ -n "$clocks" ] && sed -i "s/^clocks = .*/clocks = $clocks/" "$topo"
[ -n "$eval_every" ] && sed -i "s/^eval_every = .*/eval_every = $eval_every/" "$topo"
printf '\n[security]\ncerts = "certs"\n' >> "$topo"
"$geops" certs "$topo" --out "$out/certs" > "$out/logs/certs.log"

# Namespaces: a switch with a bridge, one namespace per site.
ip netns add "$sw"; nss+=("$sw")
ip -n "$sw" link add br0 type bridge
ip -n "$sw" link set br0 up
for i in $(seq 1 "$n"); do
  ns=$p-$i
  ip netns add "$ns"; nss+=("$ns")
  ip -n "$sw" link add "a$i" type veth peer name eth0 netns "$ns"
  ip -n "$sw" link set "a$i" master br0 up
  ip -n "$ns" addr add "10.77.0.$i/24" dev eth0
  ip -n "$ns" link set eth0 up
  ip -n "$ns" link set lo up
done

# The kernel's rate per directed link: an htb class per peer address.
declare -A rate
while read -r src dst mbit _; do
  rate[$src,$dst]=$mbit
done < <("$geops" trace show "$topo" | awk 'NR > 2 && NF >= 7 && $3 ~ /^[0-9.]+$/ {print $1, $2, $7}')
for i in $(seq 1 "$n"); do
  ns=$p-$i
  tc -n "$ns" qdisc add dev eth0 root handle 1: htb default 999 r2q 1000
  tc -n "$ns" class add dev eth0 parent 1: classid 1:999 htb rate 1gbit
  for j in $(seq 1 "$n"); do
    [ "$i" = "$j" ] && continue
    r=${rate[${sites[$((i-1))]},${sites[$((j-1))]}]:-}
    [ -n "$r" ] || { echo "no rate for ${sites[$((i-1))]} -> ${sites[$((j-1))]}" >&2; exit 1; }
    # The measured rates are TCP goodput (iperf3); htb counts whole frames:
    # 1514 bytes on the wire carry 1448 of payload (TCP with timestamps).
    wire=$(awk -v r="$r" 'BEGIN {printf "%.0f", r * 1514 / 1448 * 1000}')
    tc -n "$ns" class add dev eth0 parent 1: classid "1:$j" htb rate "${wire}kbit" ceil "${wire}kbit"
    tc -n "$ns" filter add dev eth0 parent 1: protocol ip u32 match ip dst "10.77.0.$j/32" flowid "1:$j"
  done
done

# Fidelity: a 3-second bulk TCP transfer over every directed link.
probe_py='
import socket, sys, time
mode, addr = sys.argv[1], sys.argv[2]
if mode == "server":
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind((addr, 5999)); s.listen(1)
    c, _ = s.accept(); n = 0; t0 = None
    while True:
        b = c.recv(1 << 16)
        if not b: break
        if t0 is None: t0 = time.monotonic()
        n += len(b); t1 = time.monotonic()
    print(n * 8 / (t1 - t0) / 1e6)
else:
    # The server may still be starting (a loaded machine): retry for 20 s.
    give_up = time.monotonic() + 20
    while True:
        try:
            c = socket.create_connection((addr, 5999)); break
        except OSError:
            if time.monotonic() > give_up: raise
            time.sleep(0.1)
    buf = b"x" * (1 << 16); end = time.monotonic() + 3
    while time.monotonic() < end: c.sendall(buf)
    c.close()
'
echo "link fidelity (kernel htb, 3 s bulk TCP goodput against the link's measured goodput):"
fidelity="[]"
for i in $(seq 1 "$n"); do
  for j in $(seq 1 "$n"); do
    [ "$i" = "$j" ] && continue
    ip netns exec "$p-$j" python3 -c "$probe_py" server "10.77.0.$j" > "$out/logs/probe.txt" &
    spid=$!; pids+=("$spid")  # killed on exit, should the client fail
    ip netns exec "$p-$i" python3 -c "$probe_py" client "10.77.0.$j"
    wait "$spid"
    got=$(cat "$out/logs/probe.txt")
    want=${rate[${sites[$((i-1))]},${sites[$((j-1))]}]}
    printf '  %-16s -> %-16s %8.2f Mbit/s of %8.2f (%.3f)\n' "${sites[$((i-1))]}" "${sites[$((j-1))]}" "$got" "$want" \
      "$(awk -v a="$got" -v b="$want" 'BEGIN {print a / b}')"
    fidelity=$(python3 -c "import json,sys; f=json.loads(sys.argv[1]); f.append({'src': sys.argv[2], 'dst': sys.argv[3], 'mbit_achieved': float(sys.argv[4]), 'mbit_link': float(sys.argv[5])}); print(json.dumps(f))" \
      "$fidelity" "${sites[$((i-1))]}" "${sites[$((j-1))]}" "$got" "$want")
  done
done

# Fidelity of geops' own WAN path, per link: kernel rate between the
# namespaces (as the sites run) against geops' shaper on loopback.
links_jsonl=$out/links.jsonl
: > "$links_jsonl"
lf_port=5998
[ -z "$fidelity_bin" ] || echo "link fidelity through geops' WAN path ($link_probes 1 KiB probes on an idle link, then a $link_seconds s bulk stream):"
for i in $( [ -n "$fidelity_bin" ] && seq 1 "$n"); do
  for j in $(seq 1 "$n"); do
    [ "$i" = "$j" ] && continue
    a=${sites[$((i-1))]}
    b=${sites[$((j-1))]}
    for mode in $link_modes; do
      case $mode in
        kernel) rx=(ip netns exec "$p-$j"); tx=(ip netns exec "$p-$i"); addr=10.77.0.$j; flag="--kernel_rate" ;;
        kernel1) rx=(ip netns exec "$p-$j"); tx=(ip netns exec "$p-$i"); addr=10.77.0.$j
                 flag="--kernel_rate --max_in_flight=1" ;;
        geops) rx=(); tx=(); addr=127.0.0.1; flag="" ;;
        *) echo "unknown link mode $mode" >&2; exit 2 ;;
      esac
      lf_port=$((lf_port + 1))
      "${rx[@]}" "$fidelity_bin" --role=recv --topology="$topo" --from="$a" --to="$b" --listen="$addr:$lf_port" \
        > "$out/logs/link_rx.json" 2>> "$out/logs/link_fidelity.log" &
      rpid=$!; pids+=("$rpid")
      "${tx[@]}" "$fidelity_bin" --role=send --topology="$topo" --from="$a" --to="$b" --connect="$addr:$lf_port" \
        --seconds="$link_seconds" --probes="$link_probes" $flag > "$out/logs/link_tx.json" 2>> "$out/logs/link_fidelity.log"
      # The receiver ends on the sender's final report; bounded all the same.
      for _ in $(seq 50); do kill -0 "$rpid" 2> /dev/null || break; sleep 0.1; done
      kill "$rpid" 2> /dev/null || true
      wait "$rpid" 2> /dev/null || true
      python3 - "$out/logs/link_tx.json" "$out/logs/link_rx.json" >> "$links_jsonl" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
r.update(json.load(open(sys.argv[2])))
if "error" in r:
    sys.exit("link_fidelity %s: %s" % (r["link"], r["error"]))
r["rate_ratio"] = r["received_mbit"] / r["link_mbit"]
print(json.dumps(r))
print("  %-32s %-26s rate %7.2f of %7.2f Mbit/s (%.3f)  delay %7.2f ms of %7.2f (median, %+.2f)" % (
    r["link"], r["shaping"], r["received_mbit"], r["link_mbit"], r["rate_ratio"], r["delay_ms_median"],
    r["link_delay_ms"], r["delay_error_ms_median"]), file=sys.stderr)
PY
    done
  done
done
if [ -n "$fidelity_bin" ]; then
  python3 experiments/summarize_links.py "$links_jsonl" "$out" "$(git -C "$root" rev-parse --short HEAD 2> /dev/null || echo unknown)"
fi
rm -f "$links_jsonl"
# The raw logs and event logs are kept gzipped in place, as they are
# committed (called last: what reads them runs before).
compress_logs() {
  find "$out" -type f \( -name '*.log' -o -name '*.jsonl' \) -exec gzip -9nf {} +
}
if [ "$links_only" = 1 ]; then
  grep -rlI "$root/" "$out" 2> /dev/null | xargs -r sed -i "s|$root/||g"
  compress_logs
  exit 0
fi

# The run: every process by hand, as on real hosts.
start=$(date +%s.%N)
shard_pids=()
worker_pids=()
for i in $(seq 1 "$n"); do
  s=${sites[$((i-1))]}
  shards=$(awk -v want="$s" '/^\[\[sites\]\]/ {x=0} /^name *=/ {x = ($0 ~ "\"" want "\"")} x && /^shards *=/ {print $3}' "$topo")
  for k in $(seq 0 $((shards - 1))); do
    ip netns exec "$p-$i" "$geops" site --topology "$topo" --site "$s" --shard "$k" --out "$out" \
      > "$out/logs/$s-shard-$k.log" 2>&1 &
    pids+=($!); shard_pids+=($!)
  done
done
sleep 1
for i in $(seq 1 "$n"); do
  s=${sites[$((i-1))]}
  workers=$(awk -v want="$s" '/^\[\[sites\]\]/ {x=0} /^name *=/ {x = ($0 ~ "\"" want "\"")} x && /^workers *=/ {print $3}' "$topo")
  for w in $(seq 0 $((workers - 1))); do
    ip netns exec "$p-$i" "$geops" worker --topology "$topo" --site "$s" --worker "$w" --out "$out" \
      > "$out/logs/$s-worker-$w.log" 2>&1 &
    pids+=($!); worker_pids+=($!)
  done
done
# Wait for the workers; a shard that exits before them fails the run at
# once (its log says why) rather than leaving the workers to retry.
while :; do
  running=0
  for pid in "${worker_pids[@]}"; do kill -0 "$pid" 2> /dev/null && running=$((running + 1)); done
  [ "$running" = 0 ] && break
  for pid in "${shard_pids[@]}"; do
    if ! kill -0 "$pid" 2> /dev/null; then
      echo "a shard exited during the run; its log:" >&2
      grep -l . "$out"/logs/*-shard-*.log | while read -r f; do tail -n 3 "$f" >&2; done
      exit 1
    fi
  done
  sleep 1
done
failed=0
for pid in "${worker_pids[@]}"; do wait "$pid" || failed=$((failed + 1)); done
end=$(date +%s.%N)
checks=0
if [ "$counter" = 1 ]; then
  for i in $(seq 1 "$n"); do
    s=${sites[$((i-1))]}
    if ! ip netns exec "$p-$i" "$geops" worker --check --wait 30 --topology "$topo" --site "$s" \
         > "$out/logs/$s-check.log" 2>&1; then
      checks=$((checks + 1))
      echo "site $s: counter not exact (logs/$s-check.log)" >&2
    fi
  done
fi
for pid in "${shard_pids[@]}"; do kill -TERM "$pid" 2> /dev/null || true; done
for pid in "${shard_pids[@]}"; do wait "$pid" 2> /dev/null || true; done

if [ "$loopback" = 1 ]; then
  lb=$out/loopback.toml
  cp "$topo_in" "$lb"
  if [ -n "$trace_dir" ] && [[ $trace_dir != /* ]]; then
    sed -i "s|^trace_dir = .*|trace_dir = \"$(realpath "$(dirname "$topo_in")/$trace_dir")\"|" "$lb"
  fi
  [ -n "$clocks" ] && sed -i "s/^clocks = .*/clocks = $clocks/" "$lb"
  [ -n "$eval_every" ] && sed -i "s/^eval_every = .*/eval_every = $eval_every/" "$lb"
  printf '\n[security]\ncerts = "certs"\n' >> "$lb"  # mutual TLS there too: the same work per byte
  echo "loopback run (geops launch, geops shaping rate and delay)..."
  "$geops" launch "$lb" --out "$out/loopback" --replace --plain --timeout 1500 > "$out/logs/loopback.log" 2>&1 || true
fi

python3 - "$out" "$fidelity" "$start" "$end" "$failed" "$checks" "$counter" <<'EOF'
import json, os, sys
sys.path.insert(0, "experiments")
from results_io import glob_plain, open_text
out, fidelity, start, end, failed, checks, counter = sys.argv[1:8]
fidelity = json.loads(fidelity)
finals, target = [], None
for f in glob_plain(os.path.join(out, "metrics", "*-worker-*.jsonl")):
    for line in open_text(f):
        e = json.loads(line)
        if e.get("event") == "final":
            finals.append(e)
        if e.get("event") == "eval" and isinstance(e.get("test_accuracy"), float) and e["test_accuracy"] >= 0.85:
            target = e["t"] if target is None else min(target, e["t"])
res = {
    "fidelity": fidelity,
    "max_rate_error": max(abs(f["mbit_achieved"] / f["mbit_link"] - 1) for f in fidelity) if fidelity else None,
    "wall_seconds": float(end) - float(start),
    "workers_failed": int(failed),
    "counter_sites_not_exact": int(checks) if counter == "1" else None,
    "test_accuracy": [e.get("test_accuracy") for e in finals],
    "time_to_0.85_seconds": target,
}
lb = os.path.join(out, "loopback", "summary.json")
if os.path.exists(lb):
    summary = json.load(open(lb))
    res["loopback_time_to_0.85_seconds"] = summary.get("time_to_target_seconds")
    res["loopback_test_accuracy"] = summary.get("test_accuracy")
json.dump(res, open(os.path.join(out, "results.json"), "w"), indent=2)
print(json.dumps({k: v for k, v in res.items() if k != "fidelity"}, indent=2))
EOF
# Paths relative to the repository in what stays behind.
grep -rlI "$root/" "$out" 2> /dev/null | xargs -r sed -i "s|$root/||g"
compress_logs
[ "$failed" = 0 ] && [ "$checks" = 0 ]
