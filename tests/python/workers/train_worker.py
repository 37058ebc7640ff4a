"""A small PyTorch training loop through geops: a 2-layer MLP learns a fixed
random linear map, each worker on its own data shard. Settings from GEOPS_*
variables; TEST_RESULT (a JSON file) from the test."""

import json
import os

import torch

import geops
from models import Mlp, layers_from_env

layers = layers_from_env()
worker = int(os.environ["GEOPS_WORKER"])
torch.manual_seed(1000 + worker)   # data shard of this worker
teacher = torch.Generator().manual_seed(7)
target_map = torch.randn(layers[0], layers[-1], generator=teacher)

model = Mlp(layers)
losses = []
with geops.init(model) as ps:
    # The counter topology starts every table at zero; break the symmetry the
    # same way in every worker so the hidden units differ: worker 0 pushes it.
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for step in ps.steps():
        ps.pull()
        if step == 0 and worker == 0:
            with torch.no_grad():
                g = torch.Generator().manual_seed(3)
                for p in model.parameters():
                    p.copy_(0.3 * torch.randn(p.shape, generator=g))
        x = torch.randn(32, layers[0])
        loss = torch.nn.functional.mse_loss(model(x), x @ target_map)
        opt.zero_grad()
        loss.backward()
        opt.step()
        ps.push()
        ps.clock()
        losses.append(loss.item())
        ps.report(loss=loss.item(), examples=32, accuracy=None)
    ps.pull(staleness=0)
    x = torch.randn(256, layers[0], generator=teacher)
    with torch.no_grad():
        eval_loss = torch.nn.functional.mse_loss(model(x), x @ target_map).item()
    ps.report(test_loss=eval_loss)
    params = {n: p.detach().flatten().tolist() for n, p in model.named_parameters()}
with open(os.environ["TEST_RESULT"], "w") as f:
    json.dump({"losses": losses, "eval_loss": eval_loss, "params": params}, f)
