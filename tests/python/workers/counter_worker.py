"""Counter worker: every clock it adds exactly 1.0 to every element through
the Python API, and records what it pulled. Settings from GEOPS_* variables;
TEST_LAYERS, TEST_WORKERS (workers of the site) and TEST_RESULT (a JSON file
for the test) from the test."""

import json
import os

import torch

import geops
from models import Mlp, layers_from_env

model = Mlp(layers_from_env())
workers = int(os.environ["TEST_WORKERS"])
record = {"pulls": [], "errors": []}
with geops.init(model) as ps:
    s = ps.config.staleness
    for step in ps.steps():
        ps.pull()
        values = torch.cat([p.detach().flatten() for p in model.parameters()])
        low = step + (workers - 1) * max(0, step - s)  # own updates, and every peer's through step - s - 1
        record["pulls"].append([step, float(values.min()), float(values.max())])
        if float(values.min()) < low:
            record["errors"].append(f"clock {step}: pulled {float(values.min())}, SSP needs >= {low}")
        with torch.no_grad():
            for p in model.parameters():
                p += 1.0
        ps.push()
        ps.push()  # a repeated push replaces the staged delta; it does not add it twice
        ps.clock()
        ps.report(loss=float(values.mean()))
    ps.pull(staleness=0)  # waits for every worker: the exact final values
    final = torch.cat([p.detach().flatten() for p in model.parameters()])
    record["final_min"] = float(final.min())
    record["final_max"] = float(final.max())
    record["elements"] = int(final.numel())
    record["stats"] = ps.stats()
with open(os.environ["TEST_RESULT"], "w") as f:
    json.dump(record, f)
