"""The table of experiments/run_repeats.sh.

Usage: python3 experiments/repeats_table.py RUNS_DIR ROUNDS NAME [NAME ...]

RUNS_DIR holds one `geops launch` folder per run, NAME-ROUND (events.jsonl,
summary.json). Prints markdown: one row per run with the clock and the
seconds at which the evaluating site first reached the target, the
milliseconds per clock between its first evaluation and that one (the pace
of the evaluating site's training, evaluations included), the final
accuracy at the lowest site and the seconds the shards waited at the drift
bound; then, per NAME, the median and the range of each over its rounds,
and each median against the first NAME's.
"""
import os
import statistics
import sys

from wan_events import drift_wait_seconds, load_run, model_t

COLUMNS = ["clock at target", "s to target", "ms / clock to target", "final accuracy (lowest site)",
           "drift wait s (all shards)"]


def measure(folder):
    events, summary = load_run(folder)
    target = summary.get("target_accuracy") or 0.85
    evals = [e for e in events if e["event"] == "eval"]
    # The evaluating site evaluates along the way (site 0); every site
    # checks its replica once more at the end.
    along = [e for e in evals if e["site"] == evals[0]["site"]] if evals else []
    hit = next((e for e in along if e["test_accuracy"] >= target), None)
    pace = None
    if hit and along and hit["clock"] > along[0]["clock"]:
        pace = 1000.0 * (model_t(hit) - model_t(along[0])) / (hit["clock"] - along[0]["clock"])
    finals = [e["test_accuracy"] for e in events if e["event"] == "final" and e.get("test_accuracy") is not None]
    return [hit["clock"] if hit else None, model_t(hit) if hit else None, pace,
            min(finals) if finals else None, drift_wait_seconds(events)]


def cell(j, v):
    if v is None:
        return "-"
    return "%d" % v if j == 0 else ("%.4f" % v if j == 3 else "%.1f" % v)


def main():
    runs, rounds, names = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    print("| run | " + " | ".join(COLUMNS) + " |")
    print("|---|" + "---:|" * len(COLUMNS))
    values = {n: [] for n in names}
    for i in range(1, rounds + 1):
        for n in names:
            try:
                r = measure(os.path.join(runs, "%s-%d" % (n, i)))
            except (OSError, ValueError, KeyError) as e:
                print("| %s #%d | failed: %s |%s" % (n, i, e, " |" * (len(COLUMNS) - 1)))
                continue
            values[n].append(r)
            print("| %s #%d | " % (n, i) + " | ".join(cell(j, v) for j, v in enumerate(r)) + " |")
    print()
    print("| run | " + " | ".join("median (range) " + c for c in COLUMNS) + " |")
    print("|---|" + "---:|" * len(COLUMNS))
    medians = {}
    for n in names:
        cells, medians[n] = [], []
        for j in range(len(COLUMNS)):
            got = [r[j] for r in values[n] if r[j] is not None]
            m = statistics.median(got) if got else None
            medians[n].append(m)
            cells.append("-" if m is None else "%s (%s - %s)" % (cell(j, m), cell(j, min(got)), cell(j, max(got))))
        print("| %s (%d of %d reached the target) | " % (n, sum(r[0] is not None for r in values[n]), rounds)
              + " | ".join(cells) + " |")
    base = names[0]
    print()
    for n in names[1:]:
        parts = []
        for j, what in ((1, "s to target"), (2, "ms / clock"), (0, "clock at target")):
            a, b = medians[base][j], medians[n][j]
            if a and b:
                parts.append("%s %.2fx" % (what, b / a))
        a, b = medians[base][3], medians[n][3]
        if a is not None and b is not None:
            parts.append("final accuracy %+.2f points" % (100 * (b - a)))
        print("- %s against %s, medians: %s" % (n, base, ", ".join(parts) if parts else "-"))


if __name__ == "__main__":
    main()
