"""A Fashion-MNIST CNN with BatchNorm trained through geops: the model whose
running statistics geops synchronises (docs/python.md, "Buffers").

Two 3x3 convolutions, each followed by BatchNorm2d, ReLU and max-pooling,
then a fully connected layer with BatchNorm1d and the classifier: 105,978
parameters and 224 floats of running statistics. Adam with a half-cosine
learning-rate decay, as examples/fashion_mnist_cnn/train.py; the data
loader is that example's (the Debian package dataset-fashion-mnist).

Every worker of every site runs it under `geops launch` (the topologies
here); worker 0 of each site evaluates its site's final model, buffers
included, in eval mode.
"""

import argparse
import os
import sys

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples",
                                "fashion_mnist_cnn"))
import fashion_mnist  # noqa: E402

import geops  # noqa: E402


class BnNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, kernel_size=3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        self.conv2 = nn.Conv2d(16, 32, kernel_size=3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(32)
        self.fc1 = nn.Linear(32 * 7 * 7, 64, bias=False)
        self.bn3 = nn.BatchNorm1d(64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.max_pool2d(F.relu(self.bn2(self.conv2(x))), 2)
        x = F.relu(self.bn3(self.fc1(x.flatten(1))))
        return self.fc2(x)


def evaluate(model, x, y):
    was_training = model.training
    model.eval()  # the running statistics, not the batch's
    try:
        return fashion_mnist.evaluate(model, x, y)
    finally:
        model.train(was_training)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--eval-every", type=int, default=100)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(1)
    train_x, train_y = fashion_mnist.load("train")
    test_x, test_y = fashion_mnist.load("test")
    torch.manual_seed(args.seed)
    model = BnNet()

    def final_check(m):
        accuracy, test_loss = evaluate(m, test_x, test_y)
        return {"accuracy": accuracy, "test_loss": test_loss}

    with geops.init(model, evaluate=final_check) as ps:
        cfg = ps.config
        opt = torch.optim.Adam(model.parameters(), lr=args.lr)
        data = fashion_mnist.batches(len(train_x), args.batch_size, rank=cfg.rank, world=cfg.world_size,
                                     seed=args.seed)
        for step in ps.steps():
            for group in opt.param_groups:
                group["lr"] = fashion_mnist.learning_rate(step, ps.clocks, args.lr)
            idx = next(data)
            ps.pull()
            model.train()
            loss = F.cross_entropy(model(train_x[idx]), train_y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            ps.push()
            ps.clock()
            ps.report(loss=loss.item(), examples=len(idx))
            if cfg.rank == 0 and args.eval_every and (step + 1) % args.eval_every == 0 and step + 1 < ps.clocks:
                accuracy, test_loss = evaluate(model, test_x, test_y)
                ps.report(accuracy=accuracy, test_loss=test_loss)


if __name__ == "__main__":
    main()
