"""The byte-level transformer of byte_lm.py trained in plain PyTorch, one
process, no parameter server: the reference for train.py.

    /usr/bin/python3 examples/byte_transformer/baseline.py                # 600 steps of 16 x 128 bytes
    /usr/bin/python3 examples/byte_transformer/baseline.py --threads 2

The default 600 steps are as many training examples as train.py trains on
in all under three_sites.toml (three workers x 200 clocks) or one_site.toml
(two workers x 300 clocks), with the same optimiser and schedule. Prints the
training loss, then the validation bits per byte on the first
--eval-windows windows every --eval-every steps and on the whole validation
set at the end.
"""

import argparse
import math
import time

import torch

import byte_lm


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=600, help="training steps (minibatches)")
    parser.add_argument("--batch-size", type=int, default=16, help="windows of --context bytes per step")
    parser.add_argument("--context", type=int, default=128)
    parser.add_argument("--lr", type=float, default=1e-3,
                        help="peak AdamW learning rate (warm-up, then half-cosine decay to 10%% of it)")
    parser.add_argument("--eval-every", type=int, default=100, help="steps between validation checks")
    parser.add_argument("--eval-windows", type=int, default=128,
                        help="validation windows (evenly spread) of a check during training; the end uses all")
    parser.add_argument("--print-every", type=int, default=50)
    parser.add_argument("--seed", type=int, default=1, help="model initialisation and data order")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    train, validation = byte_lm.split(byte_lm.read_corpus())
    print(f"corpus: {len(train):,} training bytes, {len(validation):,} validation bytes")

    torch.manual_seed(args.seed)
    model = byte_lm.ByteTransformer(context=args.context)
    print(f"model: {byte_lm.parameter_count(model):,} parameters")
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    data = byte_lm.batches(train, args.batch_size, args.context, seed=args.seed)

    start = time.monotonic()
    train_seconds = 0.0
    for step in range(args.steps):
        t0 = time.monotonic()
        for group in opt.param_groups:
            group["lr"] = byte_lm.learning_rate(step, args.steps, args.lr)
        x, y = next(data)
        loss = byte_lm.loss_of(model, x, y)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        train_seconds += time.monotonic() - t0
        if (step + 1) % args.print_every == 0:
            print(f"step {step + 1:5d}  loss {loss.item() / math.log(2):.3f} bits/byte  "
                  f"{1000 * train_seconds / (step + 1):.0f} ms/step", flush=True)
        if (step + 1) % args.eval_every == 0 and step + 1 < args.steps:
            bpb = byte_lm.bits_per_byte(model, validation, args.context, limit=args.eval_windows)
            print(f"step {step + 1:5d}  validation {bpb:.4f} bits/byte ({args.eval_windows} windows)  "
                  f"({time.monotonic() - start:.0f} s)", flush=True)
    bpb = byte_lm.bits_per_byte(model, validation, args.context)
    examples = args.steps * args.batch_size
    print(f"done: {args.steps} steps, {examples:,} windows ({examples * args.context:,} bytes), "
          f"validation {bpb:.4f} bits/byte, {1000 * train_seconds / args.steps:.0f} ms/step, "
          f"{time.monotonic() - start:.0f} s in all")


if __name__ == "__main__":
    main()
