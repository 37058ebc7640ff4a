#!/usr/bin/env python3
"""Split a Mahimahi cellular trace into its outages and its bandwidth swings.

The harsh scenario's varying links replay Verizon-EVDO-driving.down (scaled
to each link's mean rate, in 0.5 s bins; docs/wan_replication.md, "Links").
That trace does two things to a link: it drops to zero for up to 11 s at a
time (178 of its 2125 half-second bins carry no packet), and between the
outages its rate swings widely (coefficient of variation about 0.95 over the
bins). To tell which of the two costs asp accuracy, this writes two traces
that keep one and remove the other, with the same length (the same loop
period) and 0.5 s bins that line up with the loader's:

  <name>-no-outages.down    every empty bin gets the 10th percentile of the
                            non-empty bins' packet counts, spread evenly;
                            the swings stay as they are.
  <name>-outages-only.down  every non-empty bin gets the mean packet count
                            of the non-empty bins, spread evenly; the empty
                            bins stay empty.

geops scales a variation trace to the link's mean rate, so both keep each
link's mean bandwidth (the rate outside the outages rises a little in the
second, falls a little in the first).

Usage: python3 experiments/traces/derive_cellular_split.py SRC.down OUTDIR
Deterministic: the same source gives the same files.
"""
import os
import statistics
import sys

BIN_MS = 500


def read_trace(path):
    ms = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            if not line.isdigit():
                sys.exit(f"{path}:{n}: '{line[:40]}' is not a millisecond timestamp")
            ms.append(int(line))
    if not ms or ms[-1] <= 0:
        sys.exit(f"{path}: no packets, or a trace spanning 0 ms")
    if any(b < a for a, b in zip(ms, ms[1:])):
        sys.exit(f"{path}: timestamps go backwards")
    return ms


def spread(start_ms, count):
    """`count` timestamps spread evenly over the bin starting at start_ms."""
    return [start_ms + (i * BIN_MS) // count for i in range(count)]


def write_trace(path, stamps, period_ms):
    stamps = sorted(stamps)
    # The loader's loop period is the last timestamp: keep the source's.
    stamps = [t for t in stamps if t < period_ms] + [period_ms]
    with open(path, "w") as f:
        f.write("".join(f"{t}\n" for t in stamps))


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    src, out = sys.argv[1], sys.argv[2]
    ms = read_trace(src)
    period = ms[-1]
    bins = -(-period // BIN_MS)
    counts = [0] * bins
    for t in ms:
        counts[min(bins - 1, t // BIN_MS)] += 1
    busy = sorted(c for c in counts if c > 0)
    low = busy[len(busy) // 10]
    mean = round(statistics.mean(busy))
    name = os.path.basename(src).removesuffix(".down")
    os.makedirs(out, exist_ok=True)

    no_outages = list(ms)
    for b, c in enumerate(counts):
        if c == 0:
            no_outages += spread(b * BIN_MS, low)
    outages_only = []
    for b, c in enumerate(counts):
        if c > 0:
            outages_only += spread(b * BIN_MS, mean)
    write_trace(os.path.join(out, f"{name}-no-outages.down"), no_outages, period)
    write_trace(os.path.join(out, f"{name}-outages-only.down"), outages_only, period)
    print(f"{name}: {bins} bins of {BIN_MS} ms, {bins - len(busy)} empty; "
          f"filled with {low} packets (10th percentile), constant bins {mean} packets (mean)")


if __name__ == "__main__":
    main()
