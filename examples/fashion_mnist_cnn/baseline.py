"""The same CNN and training loop as train.py in plain PyTorch, one process,
no parameter server: the reference that train.py's accuracy and step time
are compared with.

    /usr/bin/python3 examples/fashion_mnist_cnn/baseline.py             # 3,000 steps of 64
    /usr/bin/python3 examples/fashion_mnist_cnn/baseline.py --steps 1500

3,000 steps of 64 examples (3.2 passes over the 60,000 training images) are
as many examples as train.py trains on in all under three_sites.toml (three
workers, 1,000 clocks each) or one_site.toml (two workers, 1,500 clocks).

Prints one line per --print-every steps (loss, ms per step) and the test
accuracy every --eval-every steps.
"""

import argparse
import time

import torch
import torch.nn.functional as F

import fashion_mnist


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=3000, help="training steps (minibatches)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=2e-3,
                        help="peak Adam learning rate (half-cosine decay to 5%% of it by the last step)")
    parser.add_argument("--eval-every", type=int, default=500, help="steps between test evaluations")
    parser.add_argument("--print-every", type=int, default=100)
    parser.add_argument("--seed", type=int, default=1, help="model initialisation and data order")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (1 compares with one geops worker)")
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    train_x, train_y = fashion_mnist.load("train")
    test_x, test_y = fashion_mnist.load("test")

    torch.manual_seed(args.seed)
    model = fashion_mnist.Net()
    print(f"model: {fashion_mnist.parameter_count(model):,} parameters")
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    data = fashion_mnist.batches(len(train_x), args.batch_size, seed=args.seed)

    start = time.monotonic()
    train_seconds = 0.0
    for step in range(args.steps):
        t0 = time.monotonic()
        for group in opt.param_groups:
            group["lr"] = fashion_mnist.learning_rate(step, args.steps, args.lr)
        idx = next(data)
        loss = F.cross_entropy(model(train_x[idx]), train_y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        train_seconds += time.monotonic() - t0
        if (step + 1) % args.print_every == 0:
            print(f"step {step + 1:5d}  loss {loss.item():.4f}  "
                  f"{1000 * train_seconds / (step + 1):.1f} ms/step", flush=True)
        if (step + 1) % args.eval_every == 0 or step + 1 == args.steps:
            accuracy, test_loss = fashion_mnist.evaluate(model, test_x, test_y)
            print(f"step {step + 1:5d}  test accuracy {accuracy:.4f}  test loss {test_loss:.4f}  "
                  f"({time.monotonic() - start:.1f} s)", flush=True)
    print(f"done: {args.steps} steps x {args.batch_size} examples, test accuracy {accuracy:.4f}, "
          f"{1000 * train_seconds / args.steps:.1f} ms/step, {time.monotonic() - start:.1f} s in all")


if __name__ == "__main__":
    main()
