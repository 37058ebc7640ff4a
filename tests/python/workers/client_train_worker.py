"""A PyTorch model of the worker's own (topology workload "client") trained
through geops: a small MLP learns a fixed random linear map, each worker of
each site on its own data stream. Every worker builds the model from the same
seed, so every site starts from the same values. Settings from GEOPS_*
variables; TEST_RESULT (a JSON file) from the test."""

import json
import os
import time
import zlib

import torch
from torch import nn

import geops

stream = zlib.crc32(f"{os.environ['GEOPS_SITE']}/{os.environ['GEOPS_WORKER']}".encode())
torch.manual_seed(11)                                   # the model: the same everywhere
model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 4))
target_map = torch.randn(8, 4, generator=torch.Generator().manual_seed(5))
data = torch.Generator().manual_seed(stream)            # this worker's own examples

losses, times = [], []   # each clock's loss, and when it ended (wall clock)
with geops.init(model) as ps:
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.5)
    for step in ps.steps():
        ps.pull()
        x = torch.randn(32, 8, generator=data)
        loss = nn.functional.mse_loss(model(x), x @ target_map)
        opt.zero_grad()
        loss.backward()
        opt.step()
        ps.push()
        ps.clock()
        ps.report(loss=loss.item(), examples=32)
        losses.append(loss.item())
        times.append(time.time())
    ps.pull(staleness=0)   # the final model: every worker of every site is in
    params = [p.detach().flatten().tolist() for p in model.parameters()]
with open(os.environ["TEST_RESULT"], "w") as f:
    json.dump({"losses": losses, "times": times, "params": params}, f)
