"""Table of experiments/run_bn_cnn.sh's runs: per run, each site's final
accuracy (its own replica, buffers included, in eval mode), the wall time,
and the WAN bytes with the final drain's share; then the medians and the
worst cases over the runs of each side."""

import json
import os
import statistics
import sys


def main(folder):
    rows = {"one_site": [], "three_sites": []}
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name, "summary.json")
        if not os.path.isfile(path):
            continue
        side = name.rsplit("-", 1)[0]
        if side not in rows:
            continue
        s = json.load(open(path))
        rows[side].append((name, s))
    print("| run | exit | accuracy by site | wall s | WAN MB (batches) | final drain MB | drain share |")
    print("|---|---|---|---:|---:|---:|---:|")
    for side in ("one_site", "three_sites"):
        for name, s in rows[side]:
            by_site = s.get("test_accuracy_by_site") or {}
            acc = ", ".join(f"{site} {a:.4f}" for site, a in by_site.items()) or f"{s.get('test_accuracy')}"
            payload = s.get("wan_payload_bytes") or 0
            drain = s.get("wan_drain_payload_bytes") or 0
            share = f"{100 * drain / payload:.1f}%" if payload else "-"
            print(f"| {name} | {s['exit']} | {acc} | {s['wall_seconds']:.1f} | {payload / 1e6:.2f} | "
                  f"{drain / 1e6:.2f} | {share} |")
    print()
    lan = [min((s.get("test_accuracy_by_site") or {"": s["test_accuracy"]}).values()) for _, s in rows["one_site"]]
    wan_sites = [a for _, s in rows["three_sites"] for a in (s.get("test_accuracy_by_site") or {}).values()]
    if lan and wan_sites:
        lan_median = statistics.median(lan)
        print(f"One site (LAN): median final accuracy {lan_median:.4f} over {len(lan)} runs "
              f"(range {min(lan):.4f}-{max(lan):.4f}).")
        print(f"Three sites: median over every site of every run {statistics.median(wan_sites):.4f}, "
              f"worst site {min(wan_sites):.4f}: {100 * (lan_median - min(wan_sites)):+.2f} points below the LAN "
              f"median at the worst site.")
    shares = [s["wan_drain_payload_bytes"] / s["wan_payload_bytes"] for _, s in rows["three_sites"]
              if s.get("wan_payload_bytes")]
    if shares:
        print(f"Final drain: median {100 * statistics.median(shares):.1f}% of the WAN batch bytes, "
              f"worst {100 * max(shares):.1f}%.")
    print()
    print("Accuracy is each site's final model (its own replica, the BatchNorm running statistics synchronised "
          "by geops) on the 10,000 test images, in eval mode; the resolution of every time is 0.1 s.")


if __name__ == "__main__":
    main(sys.argv[1])
