"""python_data_plane: the loop of client_data_plane.cc through the Python package.

How many bytes per second one worker moves between a PyTorch model and a
running site through `geops` (python/geops over the C++ client), to compare
with the same loop in C++ (experiments/bench/client_data_plane.cc) against
the same kind of site: same tables (all zeros at the start), same chunk size
(the topology's), same clocks. experiments/run_client_bench.sh runs the two
side by side.

The model is an nn.Module whose parameters are the tables (a 2-D tensor of
ROWS x COLS is a table of ROWS x COLS). After --warmup untimed clocks, each of
--clocks timed clocks does:
  pull    ps.pull(staleness=0): a real read of every chunk from the shards,
          copied into the parameters in place
  modify  p.add_(1e-3) on every parameter: the change a training step makes
  push    ps.push(): stages parameter - pulled value as this clock's delta
  clock   ps.clock(): ships every chunk to its shard, advances the clock

Prints one JSON line (prefix "@bench ") with the figures client_data_plane
prints: bytes (sent + received by the client's connections during the timed
clocks, from ps.stats()), bytes_per_second (over the wall time of the timed
clocks, all phases), seconds_per_clock and seconds per clock in each phase.

    GEOPS_SHARDS / --shards   host:port,... of the site's shards
    --topology FILE           the site's topology ([model] workload = "client")

Run with Debian's /usr/bin/python3 and PYTHONPATH=<build>/python.
"""

import argparse
import json
import resource
import sys
import time

import torch
from torch import nn

import geops

DEFAULT_TABLES = "t0:4000x1000,t1:3000x1000,t2:2000x1000,t3:1000x1000"


class Tables(nn.Module):
    """One zero-initialised float32 parameter per table, named like the table."""

    def __init__(self, spec):
        super().__init__()
        for item in spec.split(","):
            name, shape = item.split(":")
            rows, cols = (int(v) for v in shape.split("x"))
            self.register_parameter(name, nn.Parameter(torch.zeros(rows, cols, dtype=torch.float32)))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shards", required=True, help="host:port,... of the site's shards")
    parser.add_argument("--topology", required=True)
    parser.add_argument("--tables", default=DEFAULT_TABLES, help="name:ROWSxCOLS,... (as client_data_plane)")
    parser.add_argument("--clocks", type=int, default=20, help="timed clocks")
    parser.add_argument("--warmup", type=int, default=3, help="untimed clocks first")
    parser.add_argument("--chunk-bytes", type=int, default=None, help="default: the topology's chunk_kib")
    args = parser.parse_args()

    # One thread, like the C++ loop: the modification runs on the calling thread.
    torch.set_num_threads(1)
    model = Tables(args.tables)
    params = list(model.parameters())
    elements = sum(p.numel() for p in params)
    # The topology's clock budget must exceed warmup + clocks (run_client_bench.sh
    # sets it far above): no timed clock is the worker's last, as in client_data_plane.
    with geops.init(model, shards=args.shards, topology=args.topology, chunk_bytes=args.chunk_bytes) as ps:
        if ps.clocks is not None and ps.clocks <= args.warmup + args.clocks:
            sys.exit(f"the topology's clock budget ({ps.clocks}) must exceed --warmup + --clocks")
        phases = {"pull": 0.0, "modify": 0.0, "push": 0.0, "clock": 0.0}

        def one_clock(timed):
            t0 = time.perf_counter()
            ps.pull(staleness=0)
            t1 = time.perf_counter()
            with torch.no_grad():
                for p in params:
                    p.add_(1e-3)
            t2 = time.perf_counter()
            ps.push()
            t3 = time.perf_counter()
            ps.clock()
            t4 = time.perf_counter()
            if timed:
                phases["pull"] += t1 - t0
                phases["modify"] += t2 - t1
                phases["push"] += t3 - t2
                phases["clock"] += t4 - t3

        for _ in range(args.warmup):
            one_clock(False)
        before = ps.stats()
        faults_before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        start = time.perf_counter()
        for _ in range(args.clocks):
            one_clock(True)
        seconds = time.perf_counter() - start
        after = ps.stats()
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults_before
        if after["refreshes"] - before["refreshes"] != args.clocks:
            sys.exit(f"expected one read from the shards per clock, got {after['refreshes'] - before['refreshes']}")
        sent = after["bytes_sent"] - before["bytes_sent"]
        received = after["bytes_received"] - before["bytes_received"]
        n = args.clocks
        result = {
            "side": "python", "elements": elements, "tables": len(params), "chunk_bytes": ps.config.chunk_bytes,
            "shards": len(ps.config.shards), "clocks": n, "bytes": sent + received, "bytes_sent": sent,
            "bytes_received": received, "seconds": seconds, "bytes_per_second": (sent + received) / seconds,
            "seconds_per_clock": seconds / n, "pull_s": phases["pull"] / n, "modify_s": phases["modify"] / n,
            "push_s": phases["push"] / n, "clock_s": phases["clock"] / n, "faults_per_clock": faults / n,
        }
        print("@bench " + json.dumps(result), flush=True)
        print(f"Python package: {elements} parameters in {len(params)} tables, {n} clocks: "
              f"{result['bytes_per_second'] / 1e9:.3f} GB/s, {1000 * seconds / n:.1f} ms/clock "
              f"(pull {1000 * result['pull_s']:.1f}, modify {1000 * result['modify_s']:.1f}, "
              f"push {1000 * result['push_s']:.1f}, clock {1000 * result['clock_s']:.1f})", flush=True)


if __name__ == "__main__":
    main()
