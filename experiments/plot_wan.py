#!/usr/bin/env python3
"""Tables and plots of the WAN comparison (experiments/run_wan_comparison.sh).

Reads every launch folder under RESULTS, one scenario (summary.json,
events.jsonl or its .gz, and run.json, what the run was, of one run each; scenario.txt
names the scenario) and writes RESULTS/results.md and four PNGs:
  accuracy_vs_time.png    test accuracy against seconds since the workers started
  accuracy_vs_wan_bytes.png  test accuracy against the WAN bytes sent by then
                          (static-link runs), with a table of the bytes each
                          run needed per accuracy level: the crossover
  wan_bytes_per_link.png  bytes each directed link carried, per run
  barrier_wait.png        time reads were held by the drift bound and notices
Bytes "to target" are the WAN bytes sent until the evaluator took the
first model that reached the target accuracy (from the shards'
wan_progress events). A bsp
run stopped before the target (too slow over its links) gets an
extrapolated figure instead: its WAN bytes per clock times the clocks the
LAN run needed (bsp updates exactly like the LAN run, clock by clock).

The drift check reads every shard's wan_progress events: the largest drift
any site worked at (max_drift_clocks) must not exceed the run's cap (DS +
max_drift_allowance for asp, 0 for bsp; run.json's drift_cap).

Usage: python3 experiments/plot_wan.py experiments/results/wan/default
"""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from results_io import exists, open_text  # noqa: E402
from wan_events import bytes_at, model_t, peer_silences  # noqa: E402

ORDER = ["lan", "bsp", "all-async", "asp", "asp-ds", "avg", "diloco", "diloco-sync", "diloco-stream", "diloco-int8",
         "asp-int8", "asp-sign", "asp-varying", "bsp-varying"]


def load_run(folder):
    with open(os.path.join(folder, "summary.json")) as f:
        summary = json.load(f)
    info = {}
    if os.path.exists(os.path.join(folder, "run.json")):
        with open(os.path.join(folder, "run.json")) as f:
            info = json.load(f)
    events = []
    path = os.path.join(folder, "events.jsonl")
    if exists(path):
        with open_text(path) as f:
            for line in f:
                try:
                    events.append(json.loads(line))
                except ValueError:
                    pass
    return summary, events, info


def workers_start(events):
    """Launcher seconds at which the workers started (earliest launcher_t - t)."""
    starts = [e["launcher_t"] - e["t"] for e in events
              if e.get("event") in ("progress", "eval") and "t" in e and "launcher_t" in e]
    return min(starts) if starts else 0.0


def accuracy_curve(events, t0):
    pts = [(model_t(e) - t0, e["test_accuracy"]) for e in events
           if e.get("event") == "eval" and isinstance(e.get("test_accuracy"), (int, float))]
    return sorted(pts)


def accuracy_by_bytes(events):
    """(WAN bytes sent by then, test accuracy) at each evaluation, in order of
    the model's time: what a given byte budget buys."""
    pts = sorted((model_t(e), e["test_accuracy"]) for e in events
                 if e.get("event") == "eval" and isinstance(e.get("test_accuracy"), (int, float)))
    return [(bytes_at(events, t), a) for t, a in pts]


def bytes_to_reach(curve, level):
    """WAN bytes sent when a run's evaluated model first reached `level`; None if never."""
    for b, a in curve:
        if a >= level:
            return b
    return None


def target_time(events, target):
    hits = [model_t(e) for e in events
            if e.get("event") == "eval" and isinstance(e.get("test_accuracy"), (int, float))
            and e["test_accuracy"] >= target]
    return min(hits) if hits else None


def event_drift(events):
    """Largest max_drift_clocks and drift_bound_clocks in the wan_progress events."""
    drift = [e["max_drift_clocks"] for e in events
             if e.get("event") == "wan_progress" and isinstance(e.get("max_drift_clocks"), int)]
    bound = [e["drift_bound_clocks"] for e in events
             if e.get("event") == "wan_progress" and isinstance(e.get("drift_bound_clocks"), int)]
    return (max(drift) if drift else None), (max(bound) if bound else None)


def last_clock(events):
    clocks = [e["clock"] for e in events if e.get("event") == "progress" and isinstance(e.get("clock"), int)]
    return max(clocks) + 1 if clocks else None


def lan_target_clock(events, target):
    hits = [e["clock"] for e in events
            if e.get("event") == "eval" and isinstance(e.get("test_accuracy"), (int, float))
            and e["test_accuracy"] >= target and isinstance(e.get("clock"), int)]
    return min(hits) if hits else None


def plot_accuracy(series, target, xlabel, title, path):
    """One accuracy curve per (label, [(x, accuracy)]) on a log x axis, with
    the target as a dashed line."""
    fig, ax = plt.subplots(figsize=(9, 5.5))
    for label, c in series:
        if c:
            ax.plot([p[0] for p in c], [p[1] for p in c], marker="o", markersize=3, label=label)
    ax.axhline(target, color="grey", linestyle="--", linewidth=1)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("test accuracy (first site's worker 0)")
    ax.set_ylim(0.5, 0.9)
    ax.set_xscale("log")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def fmt(v, digits=1, unit=""):
    if v is None:
        return "-"
    return f"{v:.{digits}f}{unit}"


def main():
    results = sys.argv[1] if len(sys.argv) > 1 else "experiments/results/wan/default"
    names = [n for n in ORDER if os.path.exists(os.path.join(results, n, "summary.json"))]
    names += sorted(n for n in os.listdir(results)
                    if n not in names and os.path.exists(os.path.join(results, n, "summary.json")))
    if not names:
        print("no runs under", results)
        return 1
    title = os.path.basename(os.path.normpath(results))
    if os.path.exists(os.path.join(results, "scenario.txt")):
        with open(os.path.join(results, "scenario.txt")) as f:
            title = f.read().strip() or title
    runs = {}
    for n in names:
        summary, events, info = load_run(os.path.join(results, n))
        t0 = workers_start(events)
        target = summary.get("target_accuracy", 0.85)
        tt = target_time(events, target)
        drift, bound = event_drift(events)
        runs[n] = {
            "summary": summary, "events": events, "info": info,
            "what": info.get("what", n),
            "curve": accuracy_curve(events, t0),
            "bytes_curve": accuracy_by_bytes(events) if summary.get("sites", 1) > 1 else [],
            "time_to_target": summary.get("time_to_target_seconds"),
            "bytes_to_target": bytes_at(events, tt) if tt is not None and summary.get("sites", 1) > 1 else
            (0.0 if summary.get("sites", 1) == 1 and tt is not None else None),
            "extrapolated": False,
            "event_drift": drift, "event_bound": bound,
        }
    # A bsp run stopped before the target: bytes per clock x the LAN run's clocks to target.
    lan = runs.get("lan")
    lan_clock = lan_target_clock(lan["events"], lan["summary"].get("target_accuracy", 0.85)) if lan else None
    for n, r in runs.items():
        if not n.startswith("bsp") or r["bytes_to_target"] is not None or lan_clock is None:
            continue
        clocks = last_clock(r["events"])
        if clocks:
            r["bytes_to_target"] = (r["summary"].get("wan_bytes") or 0) / clocks * lan_clock
            r["extrapolated"] = True
            r["clocks_run"] = clocks

    lines = [f"# WAN comparison: {title}", ""]
    info = os.path.join(results, "run_info.txt")
    if os.path.exists(info):
        with open(info) as f:
            lines += ["```", f.read().strip(), "```", ""]
    lines += ["| run | what | sites | final accuracy (lowest site) | accuracy by site | time to target s | wall s | "
              "WAN MB | WAN MB to target | barrier wait s | max drift / cap clocks | link utilization | exit |",
              "|---|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    drift_ok = True
    drift_notes = []
    for n in names:
        r = runs[n]
        s = r["summary"]
        links = s.get("wan_links") or {}
        util = [v["utilization"] for v in links.values() if isinstance(v.get("utilization"), (int, float))]
        btt = r["bytes_to_target"]
        btt_s = fmt(btt / 1e6 if btt is not None else None, 2)
        if r["extrapolated"]:
            btt_s = "~" + btt_s + " (extrapolated)"
        by_site = s.get("test_accuracy_by_site") or {}
        acc_sites = " ".join(f"{v:.4f}" for v in by_site.values() if isinstance(v, (int, float))) if len(by_site) > 1 else "-"
        cap = r["info"].get("drift_cap")
        drift = r["event_drift"] if r["event_drift"] is not None else s.get("max_site_drift_clocks")
        if cap is not None and drift is not None:
            if drift > cap:
                drift_ok = False
                drift_notes.append(f"{n}: drift {drift} > cap {cap}")
            drift_s = f"{drift} / {cap}"
        else:
            drift_s = f"{drift if drift is not None else '-'} / -"
        lines.append("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |".format(
            n, r["what"], s.get("sites"), fmt(s.get("test_accuracy"), 4), acc_sites, fmt(r["time_to_target"]),
            fmt(s.get("wall_seconds")), fmt((s.get("wan_bytes") or 0) / 1e6, 2), btt_s,
            fmt(s.get("barrier_wait_seconds")), drift_s, fmt(sum(util) / len(util) if util else None, 3),
            s.get("exit")))
    lines.append("")
    lines.append("Drift check (every shard's wan_progress events): " +
                 ("no site ever worked more than its cap ahead of its slowest mirror clock." if drift_ok else
                  "VIOLATED: " + "; ".join(drift_notes)))
    silences = []
    for n in names:
        silent = peer_silences(runs[n]["events"])
        if silent:
            known = [x for _, _, x in silent if x is not None]
            silences.append(f"{n}: {len(silent)} times, {sum(known):.1f} s in all, longest "
                            f"{max(known) if known else 0:.1f} s" +
                            (f", {len(silent) - len(known)} not heard again" if len(known) < len(silent) else ""))
    lines.append("")
    lines.append("Peers silent past their lease (a link outage or a failed site; the silent peer is out of the "
                 "mirror clock of the site that cannot hear it until its next report): " +
                 ("; ".join(silences) + "." if silences else "none."))
    lines.append("")

    def ratio(a, b):
        return None if a is None or b is None or b == 0 else a / b

    def acc(name):
        return runs[name]["summary"].get("test_accuracy") if name in runs else None

    lines.append("Ratios (time to target = when the evaluator took the first model at or above the target "
                 "accuracy):")
    lines.append("")
    for name in ("asp", "asp-ds", "asp-int8", "asp-sign", "asp-varying", "all-async", "diloco", "diloco-sync",
                 "diloco-stream", "diloco-int8", "avg"):
        if name not in runs or lan is None:
            continue
        r = runs[name]
        d = 100 * ((acc(name) or 0) - (acc("lan") or 0))
        reached = (f"time to target {fmt(ratio(r['time_to_target'], lan['time_to_target']), 2)}x the LAN run's "
                   f"({fmt(r['time_to_target'])} s vs {fmt(lan['time_to_target'])} s)"
                   if r["time_to_target"] is not None else "never reached the target")
        lines.append(f"- {name}: {reached}; final accuracy {fmt(acc(name), 4)} at the lowest site vs LAN "
                     f"{fmt(acc('lan'), 4)} ({d:+.2f} points)")
    for name, other in (("bsp", "asp"), ("bsp", "diloco"), ("bsp-varying", "asp-varying"), ("diloco", "asp"),
                        ("diloco-sync", "asp"), ("diloco-stream", "asp"), ("diloco-int8", "asp"),
                        ("all-async", "asp")):
        if name not in runs or other not in runs:
            continue
        a, b = runs[name], runs[other]
        if a["bytes_to_target"] is None or b["bytes_to_target"] is None:
            continue
        note = " (bsp's figure extrapolated)" if a["extrapolated"] else ""
        lines.append(f"- {name} sends {fmt(ratio(a['bytes_to_target'], b['bytes_to_target']), 2)}x the WAN bytes of "
                     f"{other} to reach the target{note}; accuracy {fmt(acc(name), 4)} vs {fmt(acc(other), 4)}")
    lines.append("")
    # Which mode buys the most accuracy for a given number of WAN bytes: the
    # bytes each multi-site run had sent when its evaluated model first
    # reached each accuracy level, the fewest marked. Where the mark moves
    # from one mode to another as the level rises is the crossover.
    curves = [n for n in names if runs[n]["bytes_curve"] and not n.endswith("-varying")]
    levels = [0.80, 0.83, 0.85, 0.86, 0.865, 0.87]
    if len(curves) > 1:
        lines.append("WAN MB sent when each run's evaluated model first reached an accuracy (static links; "
                     "**fewest** in bold, - never reached; accuracy_vs_wan_bytes.png plots the whole curves):")
        lines.append("")
        lines.append("| run | " + " | ".join(f"{lv:g}" for lv in levels) + " |")
        lines.append("|---|" + "---:|" * len(levels))
        need = {n: [bytes_to_reach(runs[n]["bytes_curve"], lv) for lv in levels] for n in curves}
        best = [min((need[n][i] for n in curves if need[n][i] is not None), default=None)
                for i in range(len(levels))]
        for n in curves:
            cells = []
            for i, b in enumerate(need[n]):
                if b is None:
                    cells.append("-")
                else:
                    cell = fmt(b / 1e6, 2)
                    cells.append(f"**{cell}**" if best[i] is not None and b == best[i] else cell)
            lines.append(f"| {n} | " + " | ".join(cells) + " |")
        lines.append("")
    lines += [
        "Notes:",
        "",
        "- Every run trains the same model with the same data order and the same workers; the WAN runs place them "
        "in the scenario's sites, linked by its links (each process on this machine, loopback TCP shaped per link), "
        "the LAN run in one site. `what` says what each run was.",
        "- WAN MB counts what the mirror connections put on the wire (batches after quantisation and LZ4, "
        "clock reports, notices, heartbeats, Thrift framing). Barrier wait sums the time reads and clock advances "
        "were held by the drift bound and selective-barrier notices over all shards.",
        "- max drift is the largest own clock - slowest mirror clock any site worked at; cap is the largest the "
        "run's settings allow (asp: DS + max_drift_allowance; bsp: 0). docs/wan_replication.md has the rule.",
        "- A bsp run stopped by its time limit before the target has its bytes to target extrapolated: its bytes "
        "per clock times the clocks the LAN run needed (bsp applies every update every clock, like the LAN run).",
        "- avg and diloco synchronise through an outer step (docs/wan_replication.md); their last step averages the "
        "sites' models.",
        "- Time to target is quantised by the evaluation period and counts from the workers' start to when the "
        "evaluated model was taken: evaluations run on a copy in a thread of their own while training goes on, and "
        "their own time is not counted (`model_age_seconds` in the eval events). Wall times depend on what else "
        "the machine runs, so compare runs of one invocation (run_info.txt) and expect a few seconds of noise.",
        "",
        "Plots: accuracy_vs_time.png, accuracy_vs_wan_bytes.png, wan_bytes_per_link.png, barrier_wait.png.", ""]
    with open(os.path.join(results, "results.md"), "w") as f:
        f.write("\n".join(lines))
    print("\n".join(lines))

    target = runs[names[0]]["summary"].get("target_accuracy", 0.85)
    plot_accuracy([(runs[n]["what"], runs[n]["curve"]) for n in names], target,
                  "seconds since the workers started", "Fashion-MNIST MLP, " + title,
                  os.path.join(results, "accuracy_vs_time.png"))
    if curves:
        plot_accuracy([(runs[n]["what"], [(b / 1e6, a) for b, a in runs[n]["bytes_curve"] if b > 0])
                       for n in curves], target,
                      "WAN MB sent by all sites when the evaluated model was taken",
                      "Fashion-MNIST MLP, accuracy for the WAN bytes spent (static-link runs)\n" + title,
                      os.path.join(results, "accuracy_vs_wan_bytes.png"))

    wan_runs = [n for n in names if runs[n]["summary"].get("wan_bytes_by_link")]
    links = sorted({k for n in wan_runs for k in runs[n]["summary"]["wan_bytes_by_link"]})
    if wan_runs and links:
        fig, ax = plt.subplots(figsize=(max(10, 0.6 * len(links)), 5.5))
        width = 0.8 / len(wan_runs)
        for i, n in enumerate(wan_runs):
            by = runs[n]["summary"]["wan_bytes_by_link"]
            ax.bar([j + i * width for j in range(len(links))], [max(by.get(k, 0), 1) / 1e6 for k in links],
                   width, label=runs[n]["what"])
        ax.set_xticks([j + 0.4 - width / 2 for j in range(len(links))])
        ax.set_xticklabels(links, rotation=30, ha="right", fontsize=7)
        ax.set_yscale("log")
        ax.set_ylabel("MB on the wire (whole run)")
        ax.grid(True, axis="y", alpha=0.3)
        ax.legend(fontsize=7)
        ax.set_title("WAN bytes per directed link, " + title, fontsize=9)
        fig.tight_layout()
        fig.savefig(os.path.join(results, "wan_bytes_per_link.png"), dpi=120)

        fig, ax = plt.subplots(figsize=(9, 4.5))
        ax.bar(wan_runs, [runs[n]["summary"].get("barrier_wait_seconds") or 0 for n in wan_runs],
               label="barrier wait (drift bound, notices)")
        ax.bar(wan_runs, [runs[n]["summary"].get("final_wait_seconds") or 0 for n in wan_runs],
               bottom=[runs[n]["summary"].get("barrier_wait_seconds") or 0 for n in wan_runs],
               label="final wait (the last updates of the others)")
        ax.set_ylabel("seconds held (summed over shards)")
        ax.grid(True, axis="y", alpha=0.3)
        ax.legend(fontsize=8)
        ax.set_title("Time reads waited for other sites, " + title, fontsize=9)
        fig.tight_layout()
        fig.savefig(os.path.join(results, "barrier_wait.png"), dpi=120)
    return 0


if __name__ == "__main__":
    sys.exit(main())
