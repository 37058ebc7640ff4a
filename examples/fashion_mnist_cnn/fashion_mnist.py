"""Fashion-MNIST data and the small CNN shared by train.py (through geops)
and baseline.py (plain PyTorch).

The data comes from the Debian package dataset-fashion-mnist, which installs
the four IDX files of the original release, gzipped, under
/usr/share/datasets/fashion-mnist (FASHION_MNIST_DIR overrides the folder).
The loader below reads them with gzip + numpy; torchvision is not needed.
"""

import gzip
import math
import os

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

DATA_DIR = os.environ.get("FASHION_MNIST_DIR", "/usr/share/datasets/fashion-mnist")

# Mean and standard deviation of the training pixels (scaled to [0, 1]).
PIXEL_MEAN, PIXEL_STD = 0.2860, 0.3530


def read_idx(path):
    """A gzipped IDX file (the MNIST format) as a uint8 numpy array.

    Layout: two zero bytes, a type byte (0x08 = unsigned byte), the number of
    dimensions, one big-endian uint32 per dimension, then the data."""
    with gzip.open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 4 or raw[0:2] != b"\0\0" or raw[2] != 0x08:
        raise ValueError(f"{path}: not an unsigned-byte IDX file")
    ndim = raw[3]
    header = 4 + 4 * ndim
    shape = tuple(int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim))
    data = np.frombuffer(raw, dtype=np.uint8, offset=header)
    if data.size != math.prod(shape):
        raise ValueError(f"{path}: header says {shape}, file holds {data.size} bytes of data")
    return data.reshape(shape)


def load(split, data_dir=DATA_DIR):
    """(images, labels) of "train" (60,000) or "test" (10,000): images a float32
    tensor [N, 1, 28, 28], normalised; labels int64 [N]."""
    prefix = {"train": "train", "test": "t10k"}[split]
    images_path = os.path.join(data_dir, f"{prefix}-images-idx3-ubyte.gz")
    labels_path = os.path.join(data_dir, f"{prefix}-labels-idx1-ubyte.gz")
    if not os.path.exists(images_path):
        raise SystemExit(f"{images_path} does not exist: install the Debian package dataset-fashion-mnist "
                         "(scripts/setup.sh does) or set FASHION_MNIST_DIR")
    images = read_idx(images_path)
    labels = read_idx(labels_path)
    x = torch.from_numpy(images.astype(np.float32) / 255.0)
    x = ((x - PIXEL_MEAN) / PIXEL_STD).unsqueeze(1)
    y = torch.from_numpy(labels.astype(np.int64))
    return x, y


def batches(num_examples, batch_size, rank=0, world=1, seed=0):
    """Endless minibatches of example indices for worker `rank` of `world`.

    Every worker applies the same fixed permutation of the whole training set
    and takes every world-th example of it, starting at `rank`, so the
    workers' slices are disjoint and together cover the data set. Each worker
    reshuffles its own slice at every pass over it."""
    everything = torch.randperm(num_examples, generator=torch.Generator().manual_seed(seed))
    mine = everything[rank::world]
    shuffle = torch.Generator().manual_seed(seed * 1_000_003 + rank + 1)
    while True:
        order = mine[torch.randperm(len(mine), generator=shuffle)]
        for start in range(0, len(order) - batch_size + 1, batch_size):
            yield order[start:start + batch_size]


class Net(nn.Module):
    """Two 5x5 convolutions with max-pooling, then two fully connected layers:
    114,314 parameters, about 20-30 ms per batch of 64 (forward and backward)
    on one CPU core."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, kernel_size=5, padding=2)   # 28x28 -> pool -> 14x14
        self.conv2 = nn.Conv2d(16, 32, kernel_size=5, padding=2)  # 14x14 -> pool -> 7x7
        self.fc1 = nn.Linear(32 * 7 * 7, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = F.relu(self.fc1(x.flatten(1)))
        return self.fc2(x)


def learning_rate(step, steps, peak, final_fraction=0.05):
    """Half-cosine decay from `peak` at step 0 to final_fraction * peak at `steps`."""
    progress = min(step, steps) / max(steps, 1)
    return peak * (final_fraction + (1 - final_fraction) * 0.5 * (1 + math.cos(math.pi * progress)))


@torch.no_grad()
def evaluate(model, x, y, batch_size=1000):
    """(accuracy, mean cross-entropy) of `model` on (x, y)."""
    model.eval()
    correct, loss = 0, 0.0
    for start in range(0, len(x), batch_size):
        logits = model(x[start:start + batch_size])
        target = y[start:start + batch_size]
        loss += F.cross_entropy(logits, target, reduction="sum").item()
        correct += (logits.argmax(1) == target).sum().item()
    model.train()
    return correct / len(x), loss / len(x)


def parameter_count(model):
    return sum(p.numel() for p in model.parameters())
