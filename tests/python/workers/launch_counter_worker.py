"""A user's script as `geops launch` runs it ([training] command): a model of
its own (workload "client") whose initial values are multiples of 1/8, to
which every worker of every site adds exactly 1.0 per clock. Worker 0 of each
site checks its site's final replica through ``evaluate``: every element must
be its initial value plus world_size x clocks, exactly. Everything it needs
comes from the GEOPS_* variables the launcher sets."""

import torch
from torch import nn

import geops

torch.manual_seed(7)
model = nn.Sequential(nn.Linear(40, 30), nn.ReLU(), nn.Linear(30, 5))
with torch.no_grad():
    for p in model.parameters():
        p.copy_(torch.randint(-64, 64, p.shape).float() / 8)
initial = [p.detach().clone() for p in model.parameters()]
config = geops.resolve()


def evaluate(m):
    added = config.world_size * config.clocks
    error = max(float((p.detach() - (p0 + added)).abs().max()) for p, p0 in zip(m.parameters(), initial))
    return {"counter_expected": float(added), "counter_max_abs_error": error}


with geops.init(model, evaluate=evaluate) as ps:
    for step in ps.steps():
        ps.pull()
        with torch.no_grad():
            for p in model.parameters():
                p += 1.0
        ps.push()
        ps.clock()
        ps.report(loss=0.0, examples=1)
