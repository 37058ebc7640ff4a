"""Counter worker over a model of its own (topology workload "client"): the
model starts from seeded values in multiples of 1/8 (so that every sum below
is exact in float32), and every clock the worker adds exactly 1.0 to every
element. At the end it reads the final model (which waits for every worker of
every site) and records how far it is from initial + 1.0 x all workers x
clocks. TEST_SEED, TEST_TOTAL_WORKERS (of all sites) and TEST_RESULT (a JSON
file) come from the test."""

import json
import os

import torch
from torch import nn

import geops

torch.manual_seed(int(os.environ.get("TEST_SEED", "7")))
model = nn.Sequential(nn.Linear(40, 30), nn.ReLU(), nn.Linear(30, 5))
with torch.no_grad():
    for p in model.parameters():
        p.copy_(torch.randint(-64, 64, p.shape).float() / 8)
initial = [p.detach().clone() for p in model.parameters()]
total_workers = int(os.environ["TEST_TOTAL_WORKERS"])
record = {}
with geops.init(model) as ps:
    for step in ps.steps():
        ps.pull()
        with torch.no_grad():
            for p in model.parameters():
                p += 1.0
        ps.push()
        ps.clock()
        ps.report(loss=0.0)
    ps.pull(staleness=0)
    clocks = ps.current_clock
    errors = [float((p.detach() - (p0 + total_workers * clocks)).abs().max())
              for p, p0 in zip(model.parameters(), initial)]
    record["max_abs_error"] = max(errors)
    record["clocks"] = clocks
with open(os.environ["TEST_RESULT"], "w") as f:
    json.dump(record, f)
