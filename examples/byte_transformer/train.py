"""One geops worker training the byte-level transformer of byte_lm.py.

Start one such process per worker of the topology (geops launch does it for
you, see README.md). Everything that differs between workers comes from the
GEOPS_* environment variables that geops.init reads:

    GEOPS_TOPOLOGY   the topology file (sites, workers per site, clocks, staleness)
    GEOPS_SITE       which site this worker belongs to
    GEOPS_WORKER     its index within the site (0 .. workers - 1)
    GEOPS_SHARDS     host:port of the site's shards (when the topology has no base_port)

The loop is baseline.py's with ps.pull() before the forward pass, ps.push()
and ps.clock() after opt.step(), and ps.report(...) for progress. Each worker
samples its batches from its own shard of the training text; the parameter
server adds up every worker's updates, so W workers x C clocks train on as
many examples as baseline.py --steps W*C.
"""

import argparse
import math
import tomllib

import torch

import byte_lm
import geops


def place_in_topology(config):
    """(site_index, sites, rank, world) of this worker: its site's position in
    the topology, the number of sites, and its rank among all `world` workers
    of all sites (site by site, in topology order). Used to shard the data."""
    if not config.topology:
        return 0, 1, 0, 1  # no topology: this worker alone, on all of the data
    with open(config.topology, "rb") as f:
        sites = tomllib.load(f)["sites"]
    names = [s["name"] for s in sites]
    workers = [s.get("workers", 1) for s in sites]
    index = names.index(config.site)
    return index, len(sites), sum(workers[:index]) + config.worker, sum(workers)


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

    # geops.init registers the model's parameters (embeddings, every layer's
    # attention and feed-forward weights, ...) as tables with the site's
    # shards and leaves the model holding the site's current values.
    with geops.init(model, clocks=args.clocks) as ps:
        if ps.clocks is None:
            raise SystemExit("no clock budget: set [training] clocks in the topology, GEOPS_CLOCKS or --clocks")
        site_index, sites, rank, world = place_in_topology(ps.config)
        train, validation = byte_lm.split(corpus, rank=rank, world=world)
        evaluator = rank == 0  # checks during training; every site's worker 0 checks its replica at the end
        print(f"site {ps.config.site} ({site_index + 1} of {sites}), worker {ps.config.worker}: "
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

        if ps.config.worker == 0:
            # Wait for every worker of this site to finish, read the exact
            # final values of this site's replica and score the whole
            # validation set with them.
            ps.pull(staleness=0)
            bpb = byte_lm.bits_per_byte(model, validation, args.context)
            ps.report(test_loss=bpb)
            print(f"site {ps.config.site}: validation {bpb:.4f} bits/byte", flush=True)


if __name__ == "__main__":
    main()
