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
        by.setdefault(r["link"], {})["kernel" if r["shaping"].startswith("kernel") else "geops"] = r
    lines = [
        "# Link fidelity through geops' WAN path: kernel rate between namespaces vs geops' shaper",
        "",
        "command: `sudo bash experiments/run_netns.sh --links-only` (experiments/bench/link_fidelity.cc)",
        "date: %s" % datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine: %d cores, %s, Linux %s; geops %s" % (os.cpu_count(), cpu, platform.release(), rev),
        "",
        "Each directed link of the topology, measured twice in one run through the path a site's batches",
        "take (ShapedTransport -> Thrift mirror connection -> the peer's MirrorService): *kernel* = the two",
        "ends in their sites' network namespaces, htb limiting the rate and geops adding the one-way delay",
        "(`kernel_rate`), as the sites run in this script; *geops* = both ends on loopback, geops' shaper",
        "doing rate and delay. Rate: goodput of a bulk stream of 256 KiB batches (acknowledged payload bits",
        "between the first and the last acknowledgement) against the link's rate. Delay: median (p90) one-way",
        "delay of 1 KiB batches on an idle link, from offer to acknowledgement, against the link's delay.",
        "",
        "| link | link Mbit/s | kernel: achieved | ratio | geops: achieved | ratio | link delay ms"
        " | kernel: delay ms | geops: delay ms |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    pairs = [(link, m["kernel"], m["geops"]) for link, m in by.items() if "kernel" in m and "geops" in m]
    for link, k, g in pairs:
        lines.append("| %s | %.2f | %.2f | %.3f | %.2f | %.3f | %.2f | %.2f (%.2f) | %.2f (%.2f) |" % (
            link, k["link_mbit"], k["achieved_mbit"], k["rate_ratio"], g["achieved_mbit"], g["rate_ratio"],
            k["link_delay_ms"], k["delay_ms_median"], k["delay_ms_p90"], g["delay_ms_median"], g["delay_ms_p90"]))
    if pairs:
        ks = [k for _, k, _ in pairs]
        gs = [g for _, _, g in pairs]
        lines += ["", "Largest rate error: kernel %.2f%%, geops %.2f%%. Delay beyond the link's (medians):"
                  " kernel %+.2f to %+.2f ms, geops %+.2f to %+.2f ms." % (
                      100 * max(abs(r["rate_ratio"] - 1) for r in ks),
                      100 * max(abs(r["rate_ratio"] - 1) for r in gs),
                      min(r["delay_error_ms_median"] for r in ks), max(r["delay_error_ms_median"] for r in ks),
                      min(r["delay_error_ms_median"] for r in gs), max(r["delay_error_ms_median"] for r in gs))]
    open(os.path.join(out, "links.md"), "w").write("\n".join(lines) + "\n")
    print(lines[-1])


if __name__ == "__main__":
    main()
