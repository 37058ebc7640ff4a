"""One geops worker training the Fashion-MNIST CNN of fashion_mnist.py.

Start one such process per worker of the topology (geops launch does it for
you, see README.md). Everything that differs between workers comes from the
GEOPS_* environment variables that geops.init reads:

    GEOPS_TOPOLOGY   the topology file (sites, workers per site, clocks, staleness)
    GEOPS_SITE       which site this worker belongs to
    GEOPS_WORKER     its index within the site (0 .. workers - 1)
    GEOPS_SHARDS     host:port of the site's shards (when the topology has no base_port)

Compared with baseline.py, the training loop gains four calls: ps.pull()
before the forward pass (fresh parameters from the site's shards), ps.push()
after opt.step() (the change this step made), ps.clock() (ship it) and
ps.report(...) (progress and evaluation events). Each worker trains on its
own slice of the training set; the parameter server adds up every worker's
updates, so W workers of C clocks make W * C optimiser steps on the model,
as many as baseline.py makes with --steps W*C.
"""

import argparse
import tomllib

import torch
import torch.nn.functional as F

import geops
import fashion_mnist


def place_in_topology(config):
    """(site_index, sites, rank, world) of this worker: its site's position in
    the topology, the number of sites, and its rank among all `world` workers
    of all sites (site by site, in topology order). Used to split the data."""
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
    parser.add_argument("--batch-size", type=int, default=64, help="examples per worker per clock")
    parser.add_argument("--lr", type=float, default=2e-3,
                        help="peak Adam learning rate (half-cosine decay to 5%% of it by the last clock)")
    parser.add_argument("--eval-every", type=int, default=250,
                        help="clocks between test evaluations (by worker 0 of the first site)")
    parser.add_argument("--seed", type=int, default=1, help="model initialisation and data order")
    parser.add_argument("--clocks", type=int, default=None, help="clock budget (default: the topology's)")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads; 1 is best when several workers share a machine")
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    train_x, train_y = fashion_mnist.load("train")
    test_x, test_y = fashion_mnist.load("test")

    # Every worker of every site must build the model from the same seed: the
    # first worker to register fixes the initial values of the site's model,
    # and a worker whose values differ is refused (FailedPreconditionError).
    torch.manual_seed(args.seed)
    model = fashion_mnist.Net()

    # geops.init registers the model's parameters as tables with the site's
    # shards and leaves the model holding the site's current values.
    with geops.init(model, clocks=args.clocks) as ps:
        if ps.clocks is None:
            raise SystemExit("no clock budget: set [training] clocks in the topology, GEOPS_CLOCKS or --clocks")
        site_index, sites, rank, world = place_in_topology(ps.config)
        evaluator = rank == 0  # evaluates during training; every site's worker 0 checks its replica at the end
        print(f"site {ps.config.site} ({site_index + 1} of {sites}), worker {ps.config.worker}: "
              f"data slice {rank} of {world}, {fashion_mnist.parameter_count(model):,} parameters, "
              f"clocks {ps.current_clock}..{ps.clocks - 1}", flush=True)

        # The optimiser's state (Adam's moments) stays in this process; only
        # parameter values and updates go through geops.
        opt = torch.optim.Adam(model.parameters(), lr=args.lr)
        data = fashion_mnist.batches(len(train_x), args.batch_size, rank=rank, world=world, seed=args.seed)

        for step in ps.steps():  # from ps.current_clock (a restarted worker resumes) to ps.clocks - 1
            for group in opt.param_groups:
                group["lr"] = fashion_mnist.learning_rate(step, ps.clocks, args.lr)
            idx = next(data)

            ps.pull()  # every worker's updates up to the staleness bound, into model's parameters
            loss = F.cross_entropy(model(train_x[idx]), train_y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            ps.push()   # this step's change of every parameter (after opt.step() minus pulled)
            ps.clock()  # ship it to the shards; the next step may read the others' updates

            ps.report(loss=loss.item(), examples=len(idx))
            if evaluator and args.eval_every and (step + 1) % args.eval_every == 0 and step + 1 < ps.clocks:
                accuracy, test_loss = fashion_mnist.evaluate(model, test_x, test_y)
                ps.report(accuracy=accuracy, test_loss=test_loss)

        if ps.config.worker == 0:
            # Wait for every worker of this site to finish and read the exact
            # final values of this site's replica, then evaluate them.
            ps.pull(staleness=0)
            accuracy, test_loss = fashion_mnist.evaluate(model, test_x, test_y)
            ps.report(accuracy=accuracy, test_loss=test_loss)
            print(f"site {ps.config.site}: final test accuracy {accuracy:.4f}, test loss {test_loss:.4f}",
                  flush=True)


if __name__ == "__main__":
    main()
