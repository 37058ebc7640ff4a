"""Summarises the chaos.json files of experiments/run_chaos.sh into markdown.

Usage: python3 experiments/summarize_chaos.py RUNS_DIR > results.md
Environment: COMMAND_LINE, DATE_UTC, NPROC, CPU_MODEL (for the header).
"""

import glob
import json
import math
import os
import re
import sys


def dist(values):
    """median / p95 / max (nearest rank) of a list, as text."""
    if not values:
        return "-", "-", "-"
    v = sorted(values)
    rank = lambda q: v[min(len(v) - 1, max(0, math.ceil(q * len(v)) - 1))]
    return f"{rank(0.5):.2f}", f"{rank(0.95):.2f}", f"{v[-1]:.2f}"


def main():
    runs = {}
    # Natural order: mixed-seed2 before mixed-seed10.
    def natural(path):
        return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", path)]

    for path in sorted(glob.glob(os.path.join(sys.argv[1], "*.json")), key=natural):
        runs[os.path.basename(path)[:-5]] = json.load(open(path))
    out = []
    w = out.append
    w("# Chaos runs: processes killed at random, restarted by a supervisor, nothing lost")
    w("")
    w("`geops chaos` (supervisor/chaos/chaos.h) starts every `geops site` and `geops worker` of a topology by hand, on fixed")
    w("ports, and SIGKILLs random victims at random moments: one worker, one shard, or a whole site (every")
    w("process of it still running). It starts exactly the killed command lines again after a random delay; one")
    w("kill at a time. A run passes only when every worker finished with no restart but the harness's, no")
    w("process exited by itself, no worker went the stall bound without a clock advance, `geops worker --check`")
    w("found every site's counter exact (every value = workers x clocks), and every shard stopped cleanly on")
    w("SIGTERM at the end.")
    w("")
    w("## How it was run")
    w("")
    w("```")
    w(os.environ.get("COMMAND_LINE", "bash experiments/run_chaos.sh"))
    w("```")
    w("")
    w(f"- Date: {os.environ.get('DATE_UTC', '?')}. Machine: `nproc` = {os.environ.get('NPROC', '?')}, "
      f"CPU `{os.environ.get('CPU_MODEL', '?')}`; every process on this machine, loopback TCP.")
    w("- `mixed`: `experiments/topologies/chaos.toml` (3 sites x 2 shards x 2 workers, counter workload of "
      "250,250 parameters, 1500 clocks, asp with DS 4, RocksDB with sync durability, worker and peer leases "
      "of 3 s), 5 kills per run of any kind, the last once the first worker has finished (the end-of-run "
      "drain), restarts after 1-10 s.")
    w("- `shard`: the same topology, 5 single-shard kills per run restarted after 0.2-1 s.")
    w("- `size`: single-shard kills restarted after 0.5-1 s, two sites of 1 shard and 1 worker, 1M "
      "(`layers = [1000, 1000]`) and 100M (`[10000, 10000]`) parameters, 10 Gbit/s links, 30 s leases.")
    w("- `tls`: the `mixed` set with `[security] certs`: every LAN and WAN connection is mutual TLS 1.3, each "
      "restarted process loads its own certificate (`geops certs`).")
    w("")
    w("What the figures mean:")
    w("- **stall**: for each kill, the longest time a surviving site (every site but the victim's for shard "
      "and site kills; with a worker kill, its site-mates too) went without a clock advance, from its last "
      "advance before the kill until the victim's site trained again; the largest over the surviving sites. "
      "Workers report every clock advance at most every 0.1 s, so that is the resolution. Sites that had "
      "finished are left out (a drain kill of a finished site stalls no one).")
    w("- **back training**: from the restart of the killed command lines to the first clock advance of the "
      "victim's site (worker kills: of the restarted worker), which includes the process start, loading the "
      "store, the workers reconnecting and re-registering, and the gate hearing the peers' clocks again.")
    w("")
    w("## Runs")
    w("")
    w("| run | passed | kills | during the drain | kinds | wall s | failures |")
    w("|---|---|---|---|---|---|---|")
    passed = 0
    for name, r in runs.items():
        kinds = {}
        for k in r["kills"]:
            kinds[k["kind"]] = kinds.get(k["kind"], 0) + 1
        drain = sum(1 for k in r["kills"] if k["during_drain"])
        passed += 1 if r["passed"] else 0
        w(f"| {name} | {'yes' if r['passed'] else '**no**'} | {len(r['kills'])} | {drain} | "
          f"{', '.join(f'{n} {k}' for k, n in sorted(kinds.items()))} | {r['wall_s']:.1f} | "
          f"{'; '.join(r['failures'])[:200]} |")
    w("")
    w(f"**{passed} of {len(runs)} runs passed.**")
    for prefix, title in (("mixed", "Mixed kills"), ("shard", "Single-shard kills restarted within 1 s"),
                          ("size", "Restart to training by model size"),
                          ("tls", "Mixed kills with mutual TLS on every port")):
        sel = {n: r for n, r in runs.items() if n.startswith(prefix)}
        if not sel:
            continue
        w("")
        w(f"## {title}")
        w("")
        groups = {}
        for name, r in sel.items():
            for k in r["kills"]:
                key = (name if prefix == "size" else "") + (" " if prefix == "size" else "") + k["kind"] + \
                    (" (drain)" if k["during_drain"] else "")
                g = groups.setdefault(key.strip(), {"stall": [], "back": [], "delay": [], "n": 0})
                g["n"] += 1
                g["delay"].append(k["delay_s"])
                if k["max_stall_s"] is not None:
                    g["stall"].append(k["max_stall_s"])
                if k["restart_to_training_s"] is not None:
                    g["back"].append(k["restart_to_training_s"])
        w("| kill | count | restart delay s (median) | stall s median | p95 | max | back training s median | p95 | max |")
        w("|---|---|---|---|---|---|---|---|---|")
        for key, g in sorted(groups.items()):
            sm, sp, sx = dist(g["stall"])
            bm, bp, bx = dist(g["back"])
            dm = dist(g["delay"])[0]
            w(f"| {key} | {g['n']} | {dm} | {sm} | {sp} | {sx} | {bm} | {bp} | {bx} |")
    print("\n".join(out))


if __name__ == "__main__":
    main()
