"""Writes the Markdown report of experiments/run_examples.sh from the run
folders it leaves under RESULTS (argument): each geops run's summary.json and
events, and the plain-PyTorch baseline's log (either file plain or gzipped,
as kept under experiments/results). Figures:

- test accuracy at every site: worker 0 of each site reads its site's final
  replica (every worker of every site included) and evaluates it on the
  10,000 test images (geops.init(evaluate=...));
- time to target: seconds from the workers' start until an evaluation during
  training first reached [training] target_accuracy (0.90);
- WAN bytes: bytes the sites put on the links, all links together;
- bits per byte: the transformer's loss on the whole validation split.
"""

import datetime
import json
import os
import platform
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import plot_wan  # noqa: E402  (bytes to target from the shards' wan_progress events)
from results_io import exists, read_text  # noqa: E402


def load(folder):
    path = os.path.join(folder, "summary.json")
    return json.load(open(path)) if os.path.exists(path) else None


def cpu():
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        return re.search(r"Model name:\s*(.+)", out).group(1).strip()
    except Exception:
        return platform.processor() or "unknown"


def fmt(value, spec):
    return "n/a" if value is None else format(value, spec)


def bytes_to_target(folder, summary):
    _, events, _ = plot_wan.load_run(folder)
    t = plot_wan.target_time(events, summary.get("target_accuracy", 0.9))
    return None if t is None else plot_wan.bytes_at(events, t)


def per_site(summary, key):
    out = {}
    for w in summary.get("per_worker", []):
        if w.get("worker") == 0 and w.get(key) is not None:
            out[w["site"]] = w[key]
    return out


def main(results):
    lines = ["# Example workloads through geops", "",
             f"Command: `bash experiments/run_examples.sh` · machine: {os.cpu_count()} cores, {cpu()} · "
             f"date: {datetime.date.today().isoformat()}", ""]
    lan, three = load(os.path.join(results, "fmnist-lan")), load(os.path.join(results, "fmnist-three"))
    if lan or three:
        lines += ["## Fashion-MNIST CNN (examples/fashion_mnist_cnn)", "",
                  "Same CNN (114,314 parameters), same 384,000 training examples (3 workers x 2,000 clocks x 64), "
                  "Adam in every worker. LAN: one site of three workers. Three sites: one worker each over the "
                  "default AWS links (Skyplane), ASP with drift bound 2.", "",
                  "| run | final test accuracy by site | time to 0.90 (s) | wall (s) | WAN bytes to 0.90 | "
                  "WAN bytes, whole run | barrier wait (s) |",
                  "|---|---|---|---|---|---|---|"]
        for name, folder, s in (("one LAN site", "fmnist-lan", lan), ("three sites (WAN)", "fmnist-three", three)):
            if s is None:
                continue
            acc = ", ".join(f"{k} {v:.4f}" for k, v in sorted(s["test_accuracy_by_site"].items()))
            btt = bytes_to_target(os.path.join(results, folder), s) if s.get("sites", 1) > 1 else 0
            lines.append(f"| {name} | {acc} | {fmt(s.get('time_to_target_seconds'), '.1f')} | "
                         f"{s['wall_seconds']:.1f} | {fmt(btt, ',.0f')} | {s.get('wan_bytes') or 0:,} | "
                         f"{fmt(s.get('barrier_wait_seconds'), '.1f')} |")
        if lan and three and lan.get("time_to_target_seconds") and three.get("time_to_target_seconds"):
            lines += ["", f"Time to 0.90, three sites / LAN: "
                          f"**{three['time_to_target_seconds'] / lan['time_to_target_seconds']:.2f}x**; "
                          f"WAN bytes to the end: {three['wan_bytes'] / 1e6:.1f} MB, "
                          f"{three['wan_bytes'] / (114314 * 4):.0f}x the fp32 model over 6 links and 2,000 "
                          f"clocks (shipping every update: {6 * 2000}x)."]
        lines += ["", "The two runs are made one after the other by one invocation on this machine, every "
                  "process of a run on loopback (the WAN links shaped by geops). Plots (accuracy against time, "
                  "bytes per link, barrier wait): `plots/`.", ""]
    base_log = os.path.join(results, "bytelm-base.log")
    lm = load(os.path.join(results, "bytelm-three"))
    if exists(base_log) or lm:
        lines += ["## Byte-level transformer (examples/byte_transformer)", "",
                  "1,073,792 parameters, the Jargon File (Debian `jargon-text`), validation bits per byte on the "
                  "whole validation split. Equal examples and equal steps: 9,000 windows of 128 bytes, 0.75 "
                  "passes over the training text (baseline: 600 steps of 15 windows, AdamW at 1e-3; three sites: "
                  "600 bulk-synchronous clocks over the default links, each of 3 workers x 5 windows, each "
                  "worker's AdamW at 1e-3 / 3 since the shards sum the workers' updates). Same model, seed, AdamW, learning rate and "
                  "schedule shape.", "",
                  "| run | validation bits/byte | wall (s) |", "|---|---|---|"]
        base = None
        if exists(base_log):
            m = re.search(r"validation ([0-9.]+) bits/byte", read_text(base_log).split("done:")[-1])
            base = float(m.group(1)) if m else None
            lines.append(f"| plain PyTorch, one process | {fmt(base, '.4f')} | |")
        if lm:
            bpb = per_site(lm, "test_loss")
            for site, v in sorted(bpb.items()):
                lines.append(f"| geops, three sites: {site} | {v:.4f} | {lm['wall_seconds']:.1f} |")
            if base and bpb:
                worst = max(bpb.values())
                lines += ["", f"Worst site against the single process: **{100 * (worst - base) / base:+.2f}%**."]
        lines.append("")
    print("\n".join(lines))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "experiments/results/examples")
