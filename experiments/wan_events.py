"""What the WAN experiment scripts read from a launch's events.jsonl."""
import json
import os

from results_io import open_text


def load_run(folder):
    """A `geops launch` folder's events (events.jsonl, or events.jsonl.gz as
    kept under experiments/results; in order) and summary (summary.json)."""
    events = []
    with open_text(os.path.join(folder, "events.jsonl")) as f:
        for line in f:
            events.append(json.loads(line))
    with open(os.path.join(folder, "summary.json")) as f:
        summary = json.load(f)
    return events, summary


def model_t(e):
    """Launcher time at which an eval event's model was taken: the event's
    launcher_t less the evaluation's model_age_seconds (its own duration,
    and for a background evaluation the clocks until it was picked up)."""
    return e["launcher_t"] - max(0.0, e.get("model_age_seconds", 0.0))


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


def peer_silences(events):
    """Every time a shard's peer went silent past its lease (down events in
    the shards' final stats): a list of (site, peer, seconds silent), the
    seconds from its last message to the first one after; None when it was
    not heard again."""
    out = []
    for e in events:
        if e.get("event") != "shard_stats":
            continue
        for p in (e.get("wan") or {}).get("peers", []):
            for d in p.get("down_events", []):
                back = d.get("back_unix") or 0
                out.append((e.get("site"), p.get("peer"), back - d["last_heard_unix"] if back else None))
    return out


def drift_wait_seconds(events):
    """Seconds the shards' reads and advances waited at the drift bound, summed."""
    return sum(((e.get("wan") or {}).get("gate") or {}).get("drift_wait_seconds", 0.0)
               for e in events if e.get("event") == "shard_stats")
