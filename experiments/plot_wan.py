#!/usr/bin/env python3
"""Tables and plots of the WAN comparison (experiments/run_wan_comparison.sh).

Reads every launch folder under RESULTS (summary.json and events.jsonl of
one run each) and writes RESULTS/results.md and three PNGs:
  accuracy_vs_time.png    test accuracy against seconds since the workers started
  wan_bytes_per_link.png  bytes each directed link carried, per run
  barrier_wait.png        time reads were held by the drift bound and notices
Bytes "to target" are the WAN bytes sent until the first evaluation that
reached the target accuracy (from the shards' wan_progress events).

Usage: python3 experiments/plot_wan.py experiments/results/wan
"""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

# What each run was, for the legends (run_wan_comparison.sh builds them so).
WHAT = {
    "lan": "lan: 1 site x 6 workers",
    "bsp": "bsp: every update, every clock, fp32, barrier",
    "all-async": "all-async: every update, every clock, fp32, no bound",
    "asp": "asp: significant updates, 4-bit, DS 8",
    "avg": "avg: models averaged every 10 clocks",
    "diloco": "diloco: H 50, 4-bit, outer lr 0.7, Nesterov 0.9",
    "diloco-int8": "diloco: H 20, 8-bit, outer lr 0.7, Nesterov 0.9",
    "asp-int8": "asp, 8-bit",
    "asp-sign": "asp, 1-bit sign",
    "asp-mahimahi": "asp, links varying like a cellular trace",
    "bsp-mahimahi": "bsp, links varying like a cellular trace",
}

ORDER = ["lan", "bsp", "all-async", "asp", "avg", "diloco", "diloco-int8", "asp-int8", "asp-sign", "asp-mahimahi", "bsp-mahimahi"]


def load_run(folder):
    with open(os.path.join(folder, "summary.json")) as f:
        summary = json.load(f)
    events = []
    path = os.path.join(folder, "events.jsonl")
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                try:
                    events.append(json.loads(line))
                except ValueError:
                    pass
    return summary, events


def workers_start(events):
    """Launcher seconds at which the workers started (earliest launcher_t - t)."""
    starts = [e["launcher_t"] - e["t"] for e in events
              if e.get("event") in ("progress", "eval") and "t" in e and "launcher_t" in e]
    return min(starts) if starts else 0.0


def accuracy_curve(events, t0):
    pts = [(e["launcher_t"] - t0, e["test_accuracy"]) for e in events
           if e.get("event") == "eval" and isinstance(e.get("test_accuracy"), (int, float))]
    return sorted(pts)


def bytes_at(events, t):
    """WAN bytes sent by all shards up to launcher time t (interpolated)."""
    series = {}
    for e in events:
        if e.get("event") == "wan_progress":
            series.setdefault((e.get("site"), e.get("shard")), []).append((e["launcher_t"], e["wire_bytes"]))
    total = 0.0
    for pts in series.values():
        pts.sort()
        before = [p for p in pts if p[0] <= t]
        after = [p for p in pts if p[0] > t]
        if not before:
            if after:
                total += after[0][1] * max(0.0, t) / max(after[0][0], 1e-9)
            continue
        if not after:
            total += before[-1][1]
            continue
        (ta, ba), (tb, bb) = before[-1], after[0]
        total += ba + (bb - ba) * (t - ta) / (tb - ta)
    return total


def target_time(events, target):
    hits = [e["launcher_t"] for e in events
            if e.get("event") == "eval" and isinstance(e.get("test_accuracy"), (int, float))
            and e["test_accuracy"] >= target]
    return min(hits) if hits else None


def fmt(v, digits=1, unit=""):
    if v is None:
        return "-"
    return f"{v:.{digits}f}{unit}"


def main():
    results = sys.argv[1] if len(sys.argv) > 1 else "experiments/results/wan"
    names = [n for n in ORDER if os.path.exists(os.path.join(results, n, "summary.json"))]
    names += sorted(n for n in os.listdir(results)
                    if n not in names and os.path.exists(os.path.join(results, n, "summary.json")))
    if not names:
        print("no runs under", results)
        return 1
    runs = {}
    for n in names:
        summary, events = load_run(os.path.join(results, n))
        t0 = workers_start(events)
        target = summary.get("target_accuracy", 0.85)
        tt = target_time(events, target)
        runs[n] = {
            "summary": summary,
            "curve": accuracy_curve(events, t0),
            "time_to_target": summary.get("time_to_target_seconds"),
            "bytes_to_target": bytes_at(events, tt) if tt is not None and summary.get("sites", 1) > 1 else
            (0.0 if summary.get("sites", 1) == 1 and tt is not None else None),
        }

    lines = ["# WAN comparison", ""]
    info = os.path.join(results, "run_info.txt")
    if os.path.exists(info):
        with open(info) as f:
            lines += ["```", f.read().strip(), "```", ""]
    lines += ["| run | sites | final accuracy (lowest site) | time to target s | wall s | WAN MB | WAN MB to target | "
              "barrier wait s | max drift clocks | link utilization | exit |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for n in names:
        s = runs[n]["summary"]
        links = s.get("wan_links") or {}
        util = [v["utilization"] for v in links.values() if isinstance(v.get("utilization"), (int, float))]
        btt = runs[n]["bytes_to_target"]
        lines.append("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |".format(
            n, s.get("sites"), fmt(s.get("test_accuracy"), 4), fmt(runs[n]["time_to_target"]),
            fmt(s.get("wall_seconds")), fmt((s.get("wan_bytes") or 0) / 1e6, 2),
            fmt(btt / 1e6 if btt is not None else None, 2), fmt(s.get("barrier_wait_seconds")),
            s.get("max_site_drift_clocks", "-"), fmt(sum(util) / len(util) if util else None, 3), s.get("exit")))
    lines.append("")

    def ratio(a, b):
        return None if a is None or b is None or b == 0 else a / b

    lines.append("Ratios (time to target = first evaluation at or above the target accuracy):")
    lines.append("")
    for asp_name, bsp_name, label in (("asp", "bsp", "default links"),
                                      ("asp-int8", "bsp", "default links, ASP with 8-bit values"),
                                      ("asp-sign", "bsp", "default links, ASP with 1-bit values"),
                                      ("asp-mahimahi", "bsp-mahimahi", "Mahimahi-varying links")):
        asp, bsp, lan = runs.get(asp_name), runs.get(bsp_name), runs.get("lan")
        if asp is None:
            continue
        if bsp is not None:
            r = ratio(bsp["bytes_to_target"], asp["bytes_to_target"])
            lines.append(f"- {label}: BSP sends {fmt(r, 1)}x the WAN bytes of ASP to reach the target "
                         f"(all bytes of the run: {fmt(ratio(bsp['summary'].get('wan_bytes'), asp['summary'].get('wan_bytes')), 1)}x)")
            lines.append(f"- {label}: ASP reaches the target {fmt(ratio(bsp['time_to_target'], asp['time_to_target']), 2)}x "
                         f"faster than BSP; accuracy {fmt(asp['summary'].get('test_accuracy'), 4)} vs "
                         f"{fmt(bsp['summary'].get('test_accuracy'), 4)}")
        if lan is not None:
            lines.append(f"- {label}: ASP final accuracy {fmt(asp['summary'].get('test_accuracy'), 4)} vs LAN "
                         f"{fmt(lan['summary'].get('test_accuracy'), 4)} "
                         f"({fmt(100 * (asp['summary'].get('test_accuracy') or 0) - 100 * (lan['summary'].get('test_accuracy') or 0), 2)} points)")
            lines.append(f"- {label}: ASP time to target is {fmt(ratio(asp['time_to_target'], lan['time_to_target']), 2)}x "
                         f"the LAN baseline's ({fmt(asp['time_to_target'])} s vs {fmt(lan['time_to_target'])} s)")
    for name, label in (("diloco", "DiLoCo every 50 clocks, 4-bit"), ("diloco-int8", "DiLoCo every 20 clocks, 8-bit"),
                        ("avg", "averaging every 10 clocks")):
        d, asp, lan = runs.get(name), runs.get("asp"), runs.get("lan")
        if d is None:
            continue
        acc = fmt(d["summary"].get("test_accuracy"), 4)
        if asp is not None:
            lines.append(f"- default links, {label}: {fmt(ratio(d['bytes_to_target'], asp['bytes_to_target']), 2)}x "
                         f"the WAN bytes ASP needs to reach the target (all bytes of the run: "
                         f"{fmt(ratio(d['summary'].get('wan_bytes'), asp['summary'].get('wan_bytes')), 2)}x), time to "
                         f"target {fmt(ratio(d['time_to_target'], asp['time_to_target']), 2)}x ASP's; accuracy {acc} vs "
                         f"ASP {fmt(asp['summary'].get('test_accuracy'), 4)}")
        if lan is not None:
            lines.append(f"- default links, {label}: time to target {fmt(ratio(d['time_to_target'], lan['time_to_target']), 2)}x "
                         f"the LAN baseline's ({fmt(d['time_to_target'])} s vs {fmt(lan['time_to_target'])} s); accuracy "
                         f"{acc} vs LAN {fmt(lan['summary'].get('test_accuracy'), 4)}")
    lines.append("")
    lines += [
        "Notes:",
        "",
        "- Every run trains the same model with the same data order and six workers; the WAN runs place them in "
        "three sites of two workers linked by the topology's links (each process on this machine, loopback TCP "
        "shaped per link), the LAN run in one site.",
        "- WAN MB counts what the mirror connections put on the wire (batches after quantisation and LZ4, "
        "clock reports, notices, heartbeats, Thrift framing). Barrier wait sums the time reads were held by the "
        "drift bound and selective-barrier notices over all shards (several workers may wait at once).",
        "- avg and diloco synchronise through an outer step (docs/wan_replication.md): the sites' progress is averaged, "
        "so at outer lr 1 a clock moves the model a third as far as in the other modes, where every worker's update adds "
        "up; DiLoCo's Nesterov momentum (lr 0.7, 0.9) makes up for it. Their last step averages the sites' models.",
        "- Time to target is quantised by the evaluation period; wall times depend on what else the machine runs, "
        "so compare runs of one invocation (run_info.txt) and expect a few seconds of noise.",
        "",
        "Plots: accuracy_vs_time.png, wan_bytes_per_link.png, barrier_wait.png.", ""]
    with open(os.path.join(results, "results.md"), "w") as f:
        f.write("\n".join(lines))
    print("\n".join(lines))

    fig, ax = plt.subplots(figsize=(8, 5))
    for n in names:
        c = runs[n]["curve"]
        if c:
            ax.plot([p[0] for p in c], [p[1] for p in c], marker="o", markersize=3, label=WHAT.get(n, n))
    ax.axhline(runs[names[0]]["summary"].get("target_accuracy", 0.85), color="grey", linestyle="--", linewidth=1)
    ax.set_xlabel("seconds since the workers started")
    ax.set_ylabel("test accuracy")
    ax.set_ylim(0.5, 0.9)
    ax.set_xscale("log")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    ax.set_title("Fashion-MNIST MLP over the default links (3 AWS regions x 2 workers)")
    fig.tight_layout()
    fig.savefig(os.path.join(results, "accuracy_vs_time.png"), dpi=120)

    wan_runs = [n for n in names if runs[n]["summary"].get("wan_bytes_by_link")]
    links = sorted({k for n in wan_runs for k in runs[n]["summary"]["wan_bytes_by_link"]})
    if wan_runs and links:
        fig, ax = plt.subplots(figsize=(10, 5))
        width = 0.8 / len(wan_runs)
        for i, n in enumerate(wan_runs):
            by = runs[n]["summary"]["wan_bytes_by_link"]
            ax.bar([j + i * width for j in range(len(links))], [max(by.get(k, 0), 1) / 1e6 for k in links],
                   width, label=WHAT.get(n, n))
        ax.set_xticks([j + 0.4 - width / 2 for j in range(len(links))])
        ax.set_xticklabels(links, rotation=20, ha="right")
        ax.set_yscale("log")
        ax.set_ylabel("MB on the wire")
        ax.grid(True, axis="y", alpha=0.3)
        ax.legend()
        ax.set_title("WAN bytes per directed link")
        fig.tight_layout()
        fig.savefig(os.path.join(results, "wan_bytes_per_link.png"), dpi=120)

        fig, ax = plt.subplots(figsize=(8, 4))
        ax.bar(wan_runs, [runs[n]["summary"].get("barrier_wait_seconds") or 0 for n in wan_runs], label="barrier wait")
        ax.bar(wan_runs, [runs[n]["summary"].get("final_wait_seconds") or 0 for n in wan_runs],
               bottom=[runs[n]["summary"].get("barrier_wait_seconds") or 0 for n in wan_runs], label="final wait")
        ax.set_ylabel("seconds of reads held (summed over shards)")
        ax.grid(True, axis="y", alpha=0.3)
        ax.legend()
        ax.set_title("Time reads waited for other sites")
        fig.tight_layout()
        fig.savefig(os.path.join(results, "barrier_wait.png"), dpi=120)
    return 0


if __name__ == "__main__":
    sys.exit(main())
