"""The test model: an MLP whose parameters have exactly the tables of a geops
"counter"/"mlp" topology with the same layers (worker/mlp_model.cc):
fc<i>.weight is in x out, fc<i>.bias is 1 x out, in that order."""

import torch
from torch import nn


class Layer(nn.Module):
    def __init__(self, n_in, n_out):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(n_in, n_out))
        self.bias = nn.Parameter(torch.zeros(1, n_out))

    def forward(self, x):
        return x @ self.weight + self.bias


class Mlp(nn.Module):
    def __init__(self, layers):
        super().__init__()
        for i in range(len(layers) - 1):
            self.add_module(f"fc{i + 1}", Layer(layers[i], layers[i + 1]))

    def forward(self, x):
        children = list(self.children())
        for i, layer in enumerate(children):
            x = layer(x)
            if i + 1 < len(children):
                x = torch.relu(x)
        return x


def layers_from_env(default=(4, 3, 2)):
    import os
    text = os.environ.get("TEST_LAYERS")
    return tuple(int(n) for n in text.split(",")) if text else default
