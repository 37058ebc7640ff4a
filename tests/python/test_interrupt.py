"""Ctrl-C reaches a worker blocked in an RPC: a worker waiting in a pull for a
slow peer gets KeyboardInterrupt within a few seconds, not at the end of its
two-minute rpc timeout, and its session stays usable."""

import os
import signal
import sys
import time

import geops

from conftest import LineReader, start_worker, worker_env

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "workers"))
from models import Mlp  # noqa: E402


def test_sigint_interrupts_a_blocked_pull(start_site):
    site = start_site(workers=2, lease_ms=120000)
    # The slow peer: worker 1 registers and heart-beats but never clocks.
    with geops.init(Mlp((4, 3, 2)), site=site.site, worker=1, shards=site.addresses, topology=site.topology):
        proc = start_worker("blocked_worker.py", worker_env(site, 0))
        try:
            reader = LineReader(proc.stdout)
            assert reader.wait_for(lambda l: l.startswith("BLOCKING"), timeout=30), proc.stderr.read()
            time.sleep(1.0)  # into the server-side wait
            assert proc.poll() is None, "the pull should still be waiting for worker 1"
            sent = time.monotonic()
            proc.send_signal(signal.SIGINT)
            line = reader.wait_for(lambda l: l.startswith("INTERRUPTED"), timeout=5)
            assert line is not None, "no KeyboardInterrupt within 5 s of SIGINT"
            assert float(line.split()[1]) - sent < 3.0
            assert reader.wait_for(lambda l: l.startswith("STILL USABLE"), timeout=10)
            assert proc.wait(timeout=10) == 130
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)
