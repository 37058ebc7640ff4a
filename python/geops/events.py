"""Event lines: how a worker reports to ``geops launch`` (metrics/event_line.h).

Each event is one line on stdout, the prefix ``@geops `` and one JSON object
with an ``"event"`` field (``worker_started``, ``progress``, ``eval``,
``final``), written like the C++ workers write them: compact, keys sorted,
non-finite numbers as null. With a results folder, the same objects also go,
one per line, to ``<out>/metrics/<site>-worker-<i>.jsonl``.
"""

import json
import math
import os
import sys

PREFIX = "@geops "


def _clean(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def encode(event):
    """The JSON text of one event, as nlohmann::json::dump() would write it."""
    return json.dumps(_clean(event), separators=(",", ":"), sort_keys=True, ensure_ascii=False)


class EventLog:
    """Writes events to stdout and, when ``out`` is set, to the metrics file."""

    def __init__(self, site, worker, out="", stream=None):
        self._stream = stream if stream is not None else sys.stdout
        self._metrics = None
        if out:
            folder = os.path.join(out, "metrics")
            os.makedirs(folder, exist_ok=True)
            self._metrics = open(os.path.join(folder, f"{site}-worker-{worker}.jsonl"), "a", encoding="utf-8")

    def emit(self, event):
        line = encode(event)
        self._stream.write(PREFIX + line + "\n")
        self._stream.flush()
        if self._metrics is not None:
            self._metrics.write(line + "\n")
            self._metrics.flush()

    def close(self):
        if self._metrics is not None:
            self._metrics.close()
            self._metrics = None
