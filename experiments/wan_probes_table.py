"""The table of experiments/run_wan_probes.sh.

Usage: python3 experiments/wan_probes_table.py RUNS_DIR PROBE [PROBE ...]

RUNS_DIR holds one `geops launch` folder per probe (events.jsonl,
summary.json, what.txt). Prints markdown: one row per probe with its
clocks and seconds to the target, final accuracy at the lowest site, WAN
megabytes (all, and up to the target), the share of worker clocks that
read from the shard (the rest were served by the worker's SSP cache), the
seconds the shards waited at the drift bound, how often and how long a
peer was silent past its lease (out of the mirror clock of the site that
could not hear it), the batches that went through a third site while their
own link was out (relay_after_ms) and the accuracy at every evaluation of
the evaluating site.
"""
import os
import sys

from wan_events import bytes_at, drift_wait_seconds, load_run, model_t, peer_silences


def load(folder):
    events, summary = load_run(folder)
    with open(os.path.join(folder, "what.txt")) as f:
        what = f.read().strip()
    return events, summary, what


def row(name, folder):
    events, summary, what = load(folder)
    target = summary.get("target_accuracy") or 0.85
    evals = [e for e in events if e["event"] == "eval"]
    # The evaluating site is the one that evaluates along the way (site 0);
    # every site checks its replica once more at the end.
    along = [e for e in evals if e["site"] == evals[0]["site"]] if evals else []
    hit = next((e for e in along if e["test_accuracy"] >= target), None)
    finals = [e for e in events if e["event"] == "final"]
    final = min((e["test_accuracy"] for e in finals if e.get("test_accuracy") is not None),
                default=float("nan"))
    refreshes = sum(e.get("refreshes", 0) for e in finals)
    hits = sum(e.get("cache_hits", 0) for e in finals)
    reads = refreshes / (refreshes + hits) if refreshes + hits else float("nan")
    curve = " ".join("%d:%.3f" % (e["clock"], e["test_accuracy"]) for e in along)
    wan_mb = (summary.get("wan_bytes") or 0) / 1e6
    to_target = "%.2f" % (bytes_at(events, model_t(hit)) / 1e6) if hit and wan_mb > 0 else "-"
    silent = peer_silences(events)
    silent_s = "%d, %.1f" % (len(silent), sum(s for _, _, s in silent if s is not None)) if silent else "0"
    relayed = sum(int(l.get("relayed_batches", 0)) for l in (summary.get("wan_links") or {}).values())
    return "| %s | %s | %s | %s | %.4f | %.1f | %.2f | %s | %.2f | %.1f | %s | %d | %s |" % (
        name, what,
        hit["clock"] if hit else "-",
        "%.1f" % model_t(hit) if hit else "-",
        final, summary.get("wall_seconds") or 0.0,
        wan_mb, to_target, reads, drift_wait_seconds(events), silent_s, relayed, curve)


def main():
    runs, probes = sys.argv[1], sys.argv[2:]
    print("| probe | what | clocks to target | s to target | final accuracy (lowest site) "
          "| wall s | WAN MB | WAN MB to target | reads / worker clock | drift wait s (all shards) "
          "| peers silent past the lease (times, s) | batches relayed "
          "| accuracy at each evaluation (clock:accuracy) |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for p in probes:
        folder = os.path.join(runs, p)
        try:
            print(row(p, folder))
        except (OSError, ValueError, KeyError) as e:
            print("| %s | failed: %s | - | - | - | - | - | - | - | - | - | - | - |" % (p, e))


if __name__ == "__main__":
    main()
