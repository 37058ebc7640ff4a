"""One geops worker training the byte-level transformer of byte_lm.py.

Start one such process per worker of the topology (geops launch does it for
you, see README.md). Everything that differs between workers comes from the
GEOPS_* environment variables that geops.init reads:

    GEOPS_TOPOLOGY   the topology file (sites, workers per site, clocks, staleness)
    GEOPS_SITE       which site this worker belongs to
    GEOPS_WORKER     its index within the site (0 .. workers - 1)
    GEOPS_SHARDS     host:port of the site's shards (when the topology has no base_port)

From the topology, ps.config also knows the worker's rank among all the
workers of all the sites and their number (ps.config.rank, .world_size, as
torchrun's RANK and WORLD_SIZE), which split the training data.

The loop is baseline.py's with ps.pull() before the forward pass, ps.push()
and ps.clock() after opt.step(), and ps.report(...) for progress. Each worker
samples its batches from its own shard of the training text; the parameter
server adds up every worker's updates, so W workers x C clocks train on as
many examples as baseline.py --steps W*C.
"""

import argparse
import math

import torch

import byte_lm
import geops


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch-size", type=int, default=16, help="windows of --context bytes per worker per clock")
    parser.add_argument("--context", type=int, default=128)
    parser.add_argument("--lr", type=float, default=1e-3,
                        help="peak AdamW learning rate (warm-up, then half-cosine decay to 10%% of it)")
    parser.add_argument("--eval-every", type=int, default=50,
                        help="clocks between validation checks (by worker 0 of the first site)")
    parser.add_argument("--eval-windows", type=int, default=128,
                        help="validation windows (evenly spread) of a check during training; the end uses all")
    parser.add_argument("--seed", type=int, default=1, help="model initialisation and data order")
    parser.add_argument("--clocks", type=int, default=None, help="clock budget (default: the topology's)")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads; 1 is best when several workers share a machine")
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    corpus = byte_lm.read_corpus()

    # The same seed in every worker of every site: the first worker to
    # register fixes the initial values of the site's model, and a worker
    # whose values differ is refused (FailedPreconditionError).
    torch.manual_seed(args.seed)
    model = byte_lm.ByteTransformer(context=args.context)

    validation = byte_lm.split(corpus)[1]

    def final_check(model):
        """Run by worker 0 of every site on its site's exact final values:
        bits per byte over the whole validation set, reported as test_loss."""
        bpb = byte_lm.bits_per_byte(model, validation, args.context)
        print(f"validation {bpb:.4f} bits/byte", flush=True)
        return {"test_loss": bpb}

    # geops.init registers the model's parameters (embeddings, every layer's
    # attention and feed-forward weights, ...) as tables with the site's
    # shards and leaves the model holding the site's current values. When the
    # `with` block ends after the whole clock budget, worker 0 of every site
    # waits for every worker (and every other site), reads the final values
    # into `model` and calls final_check(model); its figures go into the
    # final event (and geops launch's summary, per site).
    with geops.init(model, clocks=args.clocks, evaluate=final_check) as ps:
        if ps.clocks is None:
            raise SystemExit("no clock budget: set [training] clocks in the topology, GEOPS_CLOCKS or --clocks")
        # Where this worker stands among all the workers of all the sites (as
        # torchrun's RANK and WORLD_SIZE): it picks the worker's training shard.
        cfg = ps.config
        rank, world = cfg.rank, cfg.world_size
        train = byte_lm.split(corpus, rank=rank, world=world)[0]
        evaluator = rank == 0  # checks during training too
        print(f"site {cfg.site} ({cfg.site_index + 1} of {cfg.num_sites}), worker {cfg.worker}: "
              f"training shard {rank} of {world} ({len(train):,} bytes), "
              f"{byte_lm.parameter_count(model):,} parameters, clocks {ps.current_clock}..{ps.clocks - 1}",
              flush=True)

        # AdamW's moments stay in this process; only parameter values and
        # updates go through geops. Each worker draws its own batches.
        opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
        data = byte_lm.batches(train, args.batch_size, args.context, seed=args.seed * 1000 + rank)

        for step in ps.steps():  # from ps.current_clock (a restarted worker resumes) to ps.clocks - 1
            for group in opt.param_groups:
                group["lr"] = byte_lm.learning_rate(step, ps.clocks, args.lr)
            x, y = next(data)

            ps.pull()  # every worker's updates up to the staleness bound, into the parameters
            loss = byte_lm.loss_of(model, x, y)
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            ps.push()   # this step's change of every parameter
            ps.clock()  # ship it to the shards

            # Training loss in bits per byte; one example = one window of --context bytes.
            ps.report(loss=loss.item() / math.log(2), examples=len(x))
            if evaluator and args.eval_every and (step + 1) % args.eval_every == 0 and step + 1 < ps.clocks:
                bpb = byte_lm.bits_per_byte(model, validation, args.context, limit=args.eval_windows)
                ps.report(test_loss=bpb)  # test_loss: validation bits per byte


if __name__ == "__main__":
    main()
