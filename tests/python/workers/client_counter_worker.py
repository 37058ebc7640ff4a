"""Counter worker over a model of its own (topology workload "client"), as a
user's script runs by hand or under `geops launch` ([training] command): the
model starts from seeded values in multiples of 1/8 (so that every sum below
is exact in float32), and every clock the worker adds exactly 1.0 to every
element. At the end every worker reads the final model (which waits for every
worker of every site) and checks it is initial + 1.0 x world_size x clocks;
worker 0 of each site also reports that check through ``evaluate`` (the
launcher's summary). Settings from the GEOPS_* variables; TEST_SEED (model
seed) and TEST_RESULT (a JSON file for the check) from the test, if set.
TEST_DIE_AS=<site>-worker-<i> and TEST_DIE_AT=<clock>: that worker SIGKILLs
itself at that clock, after its push and before its clock, once (a marker
file in GEOPS_OUT says it did)."""

import json
import os
import signal

import torch
from torch import nn

import geops

torch.manual_seed(int(os.environ.get("TEST_SEED", "7")))
model = nn.Sequential(nn.Linear(40, 30), nn.ReLU(), nn.Linear(30, 5))
with torch.no_grad():
    for p in model.parameters():
        p.copy_(torch.randint(-64, 64, p.shape).float() / 8)
initial = [p.detach().clone() for p in model.parameters()]
config = geops.resolve()


def max_error(m, clocks):
    added = config.world_size * clocks
    return max(float((p.detach() - (p0 + added)).abs().max()) for p, p0 in zip(m.parameters(), initial))


def evaluate(m):
    return {"counter_expected": float(config.world_size * config.clocks),
            "counter_max_abs_error": max_error(m, config.clocks)}


me = f"{config.site}-worker-{config.worker}"
die_at = int(os.environ["TEST_DIE_AT"]) if os.environ.get("TEST_DIE_AS") == me else -1
marker = os.path.join(config.out or ".", f".died-{me}")

record = {}
with geops.init(model, evaluate=evaluate) as ps:
    for step in ps.steps():
        ps.pull()
        with torch.no_grad():
            for p in model.parameters():
                p += 1.0
        ps.push()
        if step == die_at and not os.path.exists(marker):
            open(marker, "w").close()
            os.kill(os.getpid(), signal.SIGKILL)
        ps.clock()
        ps.report(loss=0.0, examples=1)
    ps.pull(staleness=0)
    record = {"max_abs_error": max_error(model, ps.current_clock), "clocks": ps.current_clock}
if os.environ.get("TEST_RESULT"):
    with open(os.environ["TEST_RESULT"], "w") as f:
        json.dump(record, f)
