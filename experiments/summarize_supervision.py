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
    if lost:
        print(f"Time lost by a killed run against the untouched run of its pair: median {statistics.median(lost):.1f} s, "
              f"worst {max(lost):.1f} s over {len(lost)} pairs (wall times, 0.1 s resolution; the untouched runs "
              f"themselves vary by a few seconds on this shared machine).")
    same = all(len({round(v, 4) for v in (s.get("test_accuracy_by_site") or {}).values()}) == 1 for s in runs.values())
    print(f"Every run's sites end with {'the same' if same else 'DIFFERENT'} final accuracy (to 4 decimals): "
          "one model at every site.")


if __name__ == "__main__":
    main(sys.argv[1])
