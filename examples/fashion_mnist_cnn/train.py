"""One geops worker training the Fashion-MNIST CNN of fashion_mnist.py.

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

Compared with baseline.py, the training loop gains four calls: ps.pull()
before the forward pass (fresh parameters from the site's shards), ps.push()
after opt.step() (the change this step made), ps.clock() (ship it) and
ps.report(...) (progress and evaluation events). Each worker trains on its
own slice of the training set; the parameter server adds up every worker's
updates, so W workers of C clocks make W * C optimiser steps on the model,
as many as baseline.py makes with --steps W*C.
"""

import argparse

import torch
import torch.nn.functional as F

import geops
import fashion_mnist


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

    def final_check(model):
        """Run by worker 0 of every site on its site's exact final values."""
        accuracy, test_loss = fashion_mnist.evaluate(model, test_x, test_y)
        print(f"final test accuracy {accuracy:.4f}, test loss {test_loss:.4f}", flush=True)
        return {"accuracy": accuracy, "test_loss": test_loss}

    # geops.init registers the model's parameters as tables with the site's
    # shards and leaves the model holding the site's current values. When the
    # `with` block ends after the whole clock budget, worker 0 of every site
    # waits for every worker (and every other site), reads the final values
    # into `model` and calls final_check(model); its figures go into the
    # final event (and geops launch's summary, per site).
    with geops.init(model, clocks=args.clocks, evaluate=final_check) as ps:
        if ps.clocks is None:
            raise SystemExit("no clock budget: set [training] clocks in the topology, GEOPS_CLOCKS or --clocks")
        # Where this worker stands among all the workers of all the sites (as
        # torchrun's RANK and WORLD_SIZE): it picks the worker's data slice.
        cfg = ps.config
        rank, world = cfg.rank, cfg.world_size
        evaluator = rank == 0  # evaluates during training too
        print(f"site {cfg.site} ({cfg.site_index + 1} of {cfg.num_sites}), worker {cfg.worker}: "
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


if __name__ == "__main__":
    main()
