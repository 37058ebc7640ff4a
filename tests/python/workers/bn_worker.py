"""A model with BatchNorm through geops: a linear layer, BatchNorm1d and a
head. Each worker sees inputs centred on its own offset (TEST_OFFSET), so
each one's running statistics alone would drift to its own mean. At the end
every worker reads the final model (staleness 0: every worker of every site
is in) and writes its running_mean, running_var and parameters to
TEST_RESULT, with the sum of what its own steps changed in each statistic,
so the test can check that every site ends with the same model and that the
statistics are exactly the workers' average."""

import json
import os

import torch
from torch import nn

import geops

torch.manual_seed(3)
model = nn.Sequential(nn.Linear(4, 4, bias=False), nn.BatchNorm1d(4, momentum=0.2), nn.Linear(4, 2))
with torch.no_grad():
    model[0].weight.copy_(torch.eye(4))  # the BatchNorm sees the inputs themselves
offset = float(os.environ["TEST_OFFSET"])
data = torch.Generator().manual_seed(int(offset * 10) + 1)
bn = model[1]
own = {"running_mean": torch.zeros(4, dtype=torch.float64), "running_var": torch.zeros(4, dtype=torch.float64)}
opt = torch.optim.SGD([p for n, p in model.named_parameters() if not n.startswith("0.")], lr=0.01)

with geops.init(model) as ps:
    for step in ps.steps():
        ps.pull()
        x = torch.randn(32, 4, generator=data) + offset
        y = (x[:, 0] > offset).long()
        model.train()
        before = {name: getattr(bn, name).clone() for name in own}
        loss = nn.functional.cross_entropy(model(x), y)
        for name in own:  # this step's change, as push() will send it
            own[name] += (getattr(bn, name) - before[name]).double()
        opt.zero_grad()
        loss.backward()
        opt.step()
        ps.push()
        ps.clock()
        ps.report(loss=loss.item())
    ps.pull(staleness=0)
    record = {"running_mean": bn.running_mean.tolist(), "running_var": bn.running_var.tolist(),
              "own_change": {name: change.tolist() for name, change in own.items()},
              "params": [p.detach().view(-1).tolist() for p in model.parameters()]}
with open(os.environ["TEST_RESULT"], "w") as f:
    json.dump(record, f)
