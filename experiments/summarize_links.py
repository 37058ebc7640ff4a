"""Tables of experiments/run_netns.sh's link fidelity measurements.

Usage: summarize_links.py LINKS.jsonl OUT_DIR GEOPS_REVISION
Reads one link_fidelity JSON object per line (each directed link twice:
kernel rate between namespaces, and geops' shaper on loopback) and writes
OUT_DIR/links.json and OUT_DIR/links.md.
"""
import datetime
import json
import os
import platform
import sys


def main():
    src, out, rev = sys.argv[1:4]
    rows = [json.loads(line) for line in open(src) if line.strip()]
    json.dump(rows, open(os.path.join(out, "links.json"), "w"), indent=2)
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), "?")
    by = {}
    for r in rows:
        mode = "geops"
        if r["shaping"].startswith("kernel"):
            mode = "kernel" if r.get("max_in_flight", 8) > 1 else "kernel1"
        by.setdefault(r["link"], {})[mode] = r
    lines = [
        "# Link fidelity through geops' WAN path: kernel rate between namespaces vs geops' shaper",
        "",
        "command: `sudo bash experiments/run_netns.sh --links-only` (experiments/bench/link_fidelity.cc)",
        "date: %s" % datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine: %d cores, %s, Linux %s; geops %s" % (os.cpu_count(), cpu, platform.release(), rev),
        "",
        "Each directed link of the topology, measured in one run through the path a site's batches take",
        "(ShapedTransport -> Thrift mirror connection -> the peer's MirrorService), plaintext:",
        "",
        "- *kernel*: the two ends in their sites' network namespaces, htb limiting the rate and geops adding",
        "  the one-way delay (`kernel_rate`), as the sites run in this script; up to 8 batches in flight;",
        "- *kernel, 1 in flight*: the same with one batch per round trip (how geops sent before it",
        "  pipelined batches);",
        "- *geops*: both ends on loopback, geops' shaper doing rate and delay.",
        "",
        "Rate: goodput of a bulk stream of 256 KiB batches as the receiver saw it (the least-squares slope",
        "of payload bits delivered over the batches' arrival times; links.json also gives",
        "`received_mbit_ends`, the payload after the first batch from the first arrival to the last) over",
        "the link's rate. Delay: median (p90) one-way",
        "delay of 1 KiB batches on an idle link, from offer to acknowledgement, against the link's delay.",
        "",
        "| link | link Mbit/s | kernel | kernel, 1 in flight | geops | link delay ms | kernel delay ms"
        " | geops delay ms |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]

    def ratio(m, mode):
        return "%.3f" % m[mode]["rate_ratio"] if mode in m else "-"

    def delay(m, mode):
        return "%.2f (%.2f)" % (m[mode]["delay_ms_median"], m[mode]["delay_ms_p90"]) if mode in m else "-"

    for link, m in by.items():
        any_row = next(iter(m.values()))
        lines.append("| %s | %.2f | %s | %s | %s | %.2f | %s | %s |" % (
            link, any_row["link_mbit"], ratio(m, "kernel"), ratio(m, "kernel1"), ratio(m, "geops"),
            any_row["link_delay_ms"], delay(m, "kernel"), delay(m, "geops")))
    lines.append("")
    summary = []
    for mode, label in (("kernel", "kernel"), ("kernel1", "kernel, 1 in flight"), ("geops", "geops")):
        rs = [m[mode] for m in by.values() if mode in m]
        if rs:
            summary.append("%s: rate %.3f-%.3f of the link, delay %+.2f to %+.2f ms beyond it (medians)" % (
                label, min(r["rate_ratio"] for r in rs), max(r["rate_ratio"] for r in rs),
                min(r["delay_error_ms_median"] for r in rs), max(r["delay_error_ms_median"] for r in rs)))
    lines.append("; ".join(summary) + ".")
    open(os.path.join(out, "links.md"), "w").write("\n".join(lines) + "\n")
    print(lines[-1])


if __name__ == "__main__":
    main()
