#!/usr/bin/env python3
"""What delay alone costs the harsh scenario's training, without geops.

The harsh runs (experiments/results/wan/harsh) train an MLP 784-512-256-10
on Fashion-MNIST with five workers of batch 32, lr 0.05 decaying by half a
cosine to 0.0005 over 1000 clocks. asp needs 1.2-1.3x the LAN's clocks to
reach 0.85 there. This replays that training in one process, in lock step,
with nothing lost or quantised: every update counts exactly once at every
replica, and the cases differ in when a peer's update lands (and, with the
modifiers below, in what a site holds back first and how often a worker
reads). It answers how many clocks the delay itself costs, so that a gap
measured in geops can be split into what the delay costs and what geops
adds.

Cases (--case, repeatable):
  lan            one replica; each clock every worker computes its gradient
                 on it before any update of that clock lands (synchronous
                 SGD over the five workers)
  delay:D        a replica per site; a site's own update lands at once, each
                 peer's D - 1 clocks later (delay:1 is the LAN)
  harsh:MS       as delay:D, with D for each pair of sites from the harsh
                 scenario's one-way delays (68-202 ms) at MS ms a clock
  ...+look:L     (appended to delay or harsh) each worker computes its
                 gradient at its replica plus L times the recent per-clock
                 sum of its peers' updates (an estimate of what is in
                 flight, as DANA-style look-ahead does)
  ...+filter:T   (appended to delay or harsh) a site ships an element to its
                 peers only once its accumulated update exceeds T times
                 max(|value|, 0.03) times the rate's decay, as asp's
                 significance filter with threshold_follows_lr and
                 value_floor 0.03 does (the rest waits, exact, for later)
  ...+ssp:S      (appended to any case) each worker reads its replica only
                 every S + 1 clocks, as an SSP cache of staleness S serves a
                 site's only worker, and adds its own updates to its copy
                 in between
  ...+part       (appended to any case) each worker draws its examples from
                 its own fifth of the training set (examples w, w + 5, ...),
                 reshuffled every epoch, as geops' workers do; without it
                 each draws from all 60,000 in an order of its own
  ...+window:N   (appended to delay or harsh, in lock step) at most N
                 batches from a site to a peer unacknowledged, as asp's
                 max_inflight_batches allows: a batch's acknowledgement is
                 back a round trip (twice the delay) after it left, and what
                 a site ships meanwhile waits, summed, and leaves as one
                 batch when a place is free (geops' backlog, coalesced per
                 chunk)
  ...+async:P    (appended to harsh:MS) the sites out of lock step: time
                 runs in ticks of P x MS ms, and at each a site does its next
                 clock with probability P (MS ms a clock on average, as
                 sites sharing cores take turns) if asp's drift bound lets
                 it: no more than DS 8 plus the allowance (its slowest-
                 reached peer's delay in clocks, at most 24) ahead of the
                 clock through which a peer's updates have landed
  ...+slow0:F    (appended to +async) site 0, the one evaluated, does its
                 next clock with probability F x P: it falls behind its
                 peers until the drift bound holds them, as geops'
                 evaluating site does (it also evaluates, on shared cores)

Accuracy is site 0's replica on the 10,000 test images every 25 clocks.
Runs go side by side (--jobs); the table gives each run and, per case, the
median clock at which 0.85 was first reached and its ratio to the LAN's.

Usage: python3 experiments/delay_sim.py --case lan --case delay:2 --seeds 1,2,3 [--table FILE]
"""
import argparse
import gzip
import math
import multiprocessing
import os
import platform
import random
import statistics
import struct
import subprocess
import sys
import time
from datetime import datetime, timezone

DATA = "/usr/share/datasets/fashion-mnist/"    # Debian's dataset-fashion-mnist
LAYERS = [784, 512, 256, 10]
# One-way delay in ms from site j (column) to site i (row): us-west-1,
# sa-east-1, eu-north-1, af-south-1, ap-southeast-2 (`geops trace show
# experiments/topologies/harsh.toml`).
HARSH_MS = [[0, 88.5, 87.3, 145.0, 68.2],
            [88.5, 0, 110.9, 167.5, 153.9],
            [87.2, 112.0, 0, 84.6, 145.2],
            [144.9, 167.5, 84.6, 0, 201.7],
            [68.2, 153.9, 145.3, 201.7, 0]]
WORKERS, BATCH, CLOCKS, LR0, LR1 = 5, 32, 1000, 0.05, 0.0005
EVAL_EVERY, TARGET = 25, 0.85


def load(kind):
    import numpy as np
    import torch
    try:
        with gzip.open(DATA + f"{kind}-images-idx3-ubyte.gz") as f:
            magic, n, rows, cols = struct.unpack(">IIII", f.read(16))
            x = np.frombuffer(f.read(), np.uint8)
        with gzip.open(DATA + f"{kind}-labels-idx1-ubyte.gz") as f:
            f.read(8)
            y = np.frombuffer(f.read(), np.uint8)
    except OSError as e:
        sys.exit(f"cannot read Fashion-MNIST under {DATA} ({e}); install dataset-fashion-mnist")
    if magic != 2051 or x.size != n * rows * cols or y.size != n:
        sys.exit(f"{DATA}{kind}: not an IDX image/label pair")
    x = x.reshape(n, rows * cols).astype(np.float32) / 255.0
    return torch.from_numpy(x), torch.from_numpy(y.astype(np.int64))


def parse_case(case):
    """A case name's settings: delays[i][j] in clocks (None for the LAN),
    look-ahead, filter threshold, SSP staleness, pace (0: lock step) and ms a
    clock. Raises ValueError naming the case."""
    base, *mods = case.split("+")
    got = {"delays": None, "lookahead": 0.0, "threshold": 0.0, "ssp": 0, "pace": 0.0, "ms": 0.0, "part": False,
           "window": 0, "slow0": 1.0}
    for mod in mods:
        if mod == "part":
            got["part"] = True
            continue
        key, _, value = mod.partition(":")
        if key == "ssp" and value.isdigit():
            got["ssp"] = int(value)
            continue
        if key == "window" and value.isdigit() and int(value) >= 1:
            got["window"] = int(value)
            continue
        try:
            number = float(value)
        except ValueError:
            number = -1.0
        if key in ("look", "filter") and number > 0:
            got["lookahead" if key == "look" else "threshold"] = number
        elif key == "async" and 0 < number <= 1 and base.startswith("harsh:"):
            got["pace"] = number
        elif key == "slow0" and 0 < number <= 1:
            got["slow0"] = number
        else:
            raise ValueError(f"case {case}: '+{mod}' is not +look:L or +filter:T (positive), +ssp:S "
                             "(whole), +window:N (N >= 1), +part, +async:P (in (0, 1], after harsh:MS) or +slow0:F "
                             "(in (0, 1], with +async)")
    if got["lookahead"] and got["pace"]:
        raise ValueError(f"case {case}: +look and +async do not combine (the look-ahead is kept per clock)")
    if got["slow0"] < 1 and not got["pace"]:
        raise ValueError(f"case {case}: +slow0 needs +async (in lock step every site moves each clock)")
    if got["window"] and got["pace"]:
        raise ValueError(f"case {case}: +window and +async do not combine (the window is kept in clocks)")
    if base == "lan":
        if got["lookahead"] or got["threshold"] or got["window"]:
            raise ValueError(f"case {case}: the LAN has no peers' updates to look ahead at, filter or window")
        return got
    kind, _, arg = base.partition(":")
    if kind == "delay" and arg.isdigit() and int(arg) >= 1:
        d = int(arg)
        got["delays"] = [[0 if i == j else d for j in range(WORKERS)] for i in range(WORKERS)]
        return got
    if kind == "harsh":
        try:
            got["ms"] = float(arg)
        except ValueError:
            got["ms"] = 0.0
        if got["ms"] > 0:
            got["delays"] = [[0 if i == j else max(1, round(HARSH_MS[i][j] / got["ms"])) for j in range(WORKERS)]
                             for i in range(WORKERS)]
            return got
    raise ValueError(f"case {case}: expected lan, delay:D (D >= 1) or harsh:MS (MS > 0), "
                     "optionally +look:L, +filter:T, +ssp:S, +window:N, +part and +async:P")


def run(case, seed):
    import torch
    torch.set_num_threads(1)
    got = parse_case(case)
    delays, lookahead, threshold, ssp = got["delays"], got["lookahead"], got["threshold"], got["ssp"]
    train_x, train_y = load("train")
    test_x, test_y = load("t10k")
    shapes = list(zip(LAYERS[:-1], LAYERS[1:]))

    def unflatten(v):
        out, k = [], 0
        for i, o in shapes:
            out.append(v[k:k + i * o].view(i, o))
            k += i * o
            out.append(v[k:k + o])
            k += o
        return out

    def logits(v, x):
        ps = unflatten(v)
        for layer in range(0, len(ps), 2):
            x = x @ ps[layer] + ps[layer + 1]
            if layer + 2 < len(ps):
                x = torch.relu(x)
        return x

    def gradient(v, x, y):
        v = v.detach().requires_grad_(True)
        (g,) = torch.autograd.grad(torch.nn.functional.cross_entropy(logits(v, x), y), v)
        return g

    gen = torch.Generator().manual_seed(seed)
    init = []
    for i, o in shapes:      # geops' MLP: uniform +-sqrt(6 / fan-in), zero biases
        init += [(torch.rand(i, o, generator=gen) * 2 - 1) * math.sqrt(6.0 / i), torch.zeros(o)]
    v0 = torch.cat([p.reshape(-1) for p in init])
    order = [torch.randperm(len(train_x), generator=gen) for _ in range(WORKERS)]
    replicas = [v0.clone() for _ in range(1 if delays is None else WORKERS)]
    in_flight = [torch.zeros_like(v0) for _ in range(WORKERS)]   # per-clock peer mass, averaged
    held = [torch.zeros_like(v0) for _ in range(WORKERS)]        # what the filter has not shipped yet
    copies = [None] * WORKERS                                   # each worker's SSP copy (ssp > 0)
    deepest = 0 if delays is None else max(max(row) for row in delays)
    history = []           # history[c][w]: worker w's update of clock c (the last `deepest` kept)
    evals = []

    def evaluate(c):
        """Site 0's test accuracy after its clock c, into evals."""
        with torch.no_grad():
            evals.append((c, (logits(replicas[0], test_x).argmax(1) == test_y).float().mean().item()))

    def rate(c):
        return LR1 + 0.5 * (LR0 - LR1) * (1 + math.cos(math.pi * c / (CLOCKS - 1)))

    epochs = {}   # +part: worker -> (epoch, that epoch's order of its examples)

    def batch(w, c):
        """The indices of worker w's examples at clock c."""
        if not got["part"]:
            start = (c * BATCH) % len(train_x)
            return order[w][start:start + BATCH]
        mine = torch.arange(w, len(train_x), WORKERS)
        per_epoch = len(mine) // BATCH
        epoch, k = divmod(c, per_epoch)
        if epochs.get(w, (None,))[0] != epoch:
            shuffle = torch.Generator().manual_seed(seed * 1000003 + w * 1009 + epoch)
            epochs[w] = (epoch, mine[torch.randperm(len(mine), generator=shuffle)])
        return epochs[w][1][k * BATCH:(k + 1) * BATCH]

    def step(w, c, replica):
        """Worker w's update of clock c, computed at its view of `replica`."""
        idx = batch(w, c)
        view = replica
        if ssp:
            if c % (ssp + 1) == 0:
                copies[w] = view.clone()
            view = copies[w]
        if lookahead:
            view = view + lookahead * in_flight[w]
        u = -rate(c) * gradient(view, train_x[idx], train_y[idx])
        if ssp:
            copies[w] += u
        return u

    def ship(w, u, c):
        """What site w sends its peers of its update u of clock c (all of it, or what the filter lets through)."""
        if not threshold:
            return u
        held[w] += u
        take = held[w].abs() > threshold * (rate(c) / LR0) * replicas[w].abs().clamp(min=0.03)
        out = torch.where(take, held[w], torch.zeros_like(v0))
        held[w] -= out
        return out

    window = got["window"]
    pending = [[None] * WORKERS for _ in range(WORKERS)]   # pending[j][i]: j's mass waiting for a place to i
    unacked = [[[] for _ in range(WORKERS)] for _ in range(WORKERS)]  # unacked[j][i]: clocks its places free
    landing = [{} for _ in range(WORKERS)]                 # landing[i][c]: what lands at i at clock c

    def send_windowed(c, shipped):
        """+window: each site's shipment of clock c joins what waits for
        each peer; it leaves as one batch while fewer than N are unacknowledged."""
        for j in range(WORKERS):
            for i in range(WORKERS):
                if i == j:
                    continue
                pending[j][i] = shipped[j].clone() if pending[j][i] is None else pending[j][i].add_(shipped[j])
                unacked[j][i] = [free for free in unacked[j][i] if free > c]
                if len(unacked[j][i]) < window:
                    d = delays[i][j]
                    land = c + d - 1
                    landing[i][land] = landing[i].get(land, 0) + pending[j][i]
                    unacked[j][i].append(c + 2 * d - 1)
                    pending[j][i] = None

    if got["pace"]:
        # Out of lock step: ticks of pace x ms; a site does its next clock
        # with probability `pace` when the drift bound lets it.
        rng = random.Random(seed)
        tick_ms = got["pace"] * got["ms"]
        ticks = [[0 if i == j else max(1, round(HARSH_MS[i][j] / tick_ms)) for j in range(WORKERS)]
                 for i in range(WORKERS)]
        bound = [8 + min(24, math.ceil(max(HARSH_MS[j][i] for j in range(WORKERS) if j != i) / got["ms"]))
                 for i in range(WORKERS)]
        deep = max(max(row) for row in ticks)
        clock = [0] * WORKERS
        clocks_after = []  # clocks_after[t][j]: j's clock after tick t
        sent = []          # sent[t][j]: what j shipped at tick t, or None
        t = 0
        while min(clock) < CLOCKS:
            landed = lambda i, j: clocks_after[t - ticks[i][j]][j] if t - ticks[i][j] >= 0 else 0
            moving = [i for i in range(WORKERS)
                      if clock[i] < CLOCKS and rng.random() < got["pace"] * (got["slow0"] if i == 0 else 1) and
                      clock[i] - min(landed(i, j) for j in range(WORKERS) if j != i) <= bound[i]]
            own = {i: step(i, clock[i], replicas[i]) for i in moving}
            sent.append([ship(i, own[i], clock[i]) if i in own else None for i in range(WORKERS)])
            for i in range(WORKERS):
                for j in range(WORKERS):
                    if j != i and t - ticks[i][j] + 1 >= 0 and sent[t - ticks[i][j] + 1][j] is not None:
                        replicas[i] += sent[t - ticks[i][j] + 1][j]
                if i in own:
                    replicas[i] += own[i]
                    clock[i] += 1
            clocks_after.append(list(clock))
            if len(sent) > deep:
                sent[len(sent) - deep - 1] = None
            if 0 in own and clock[0] % EVAL_EVERY == 0:
                evaluate(clock[0])
            t += 1
    else:
        for c in range(CLOCKS):
            updates = [step(w, c, replicas[0] if delays is None else replicas[w]) for w in range(WORKERS)]
            if delays is None:
                for u in updates:
                    replicas[0] += u
            else:
                history.append([ship(w, updates[w], c) for w in range(WORKERS)])
                if window:
                    send_windowed(c, history[-1])
                for i in range(WORKERS):
                    arrived = torch.zeros_like(v0)
                    if window:
                        arrived += landing[i].pop(c, 0)
                    for j in range(WORKERS):
                        if not window and j != i and c - delays[i][j] + 1 >= 0:
                            arrived += history[c - delays[i][j] + 1][j]
                    replicas[i] += updates[i] + arrived
                    if lookahead:
                        in_flight[i].mul_(0.9).add_(arrived, alpha=0.1)
                if len(history) > deepest:
                    history[len(history) - deepest - 1] = None
            if (c + 1) % EVAL_EVERY == 0:
                evaluate(c + 1)
    reached = next((c for c, a in evals if a >= TARGET), None)
    return {"case": case, "seed": seed, "reached": reached, "final": evals[-1][1],
            "at500": dict(evals).get(500), "curve": evals}


def machine():
    cpu = platform.processor() or "?"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"{os.cpu_count()} cores, {cpu}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--case", action="append", required=True, help="lan, delay:D, harsh:MS, +look:L, +filter:T, +ssp:S, +window:N, +part, +async:P, +slow0:F")
    ap.add_argument("--seeds", default="1", help="comma-separated seeds")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--table", help="markdown file to write (default: print)")
    args = ap.parse_args()
    try:
        for case in args.case:
            parse_case(case)
        seeds = [int(s) for s in args.seeds.split(",")]
    except ValueError as e:
        ap.error(str(e))
    if "lan" not in args.case:
        ap.error("the cases must include lan: the ratios are against it")
    started = time.time()
    jobs = [(case, seed) for seed in seeds for case in args.case]
    with multiprocessing.Pool(max(1, args.jobs)) as pool:
        results = pool.starmap(run, jobs)
    try:
        here = os.path.dirname(os.path.abspath(__file__))
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                             cwd=here).stdout.strip()
        if subprocess.run(["git", "status", "--porcelain", "--", os.path.basename(__file__)], capture_output=True,
                          text=True, cwd=here).stdout.strip():
            rev += "+local changes"
    except OSError:
        rev = "?"
    cases = " ".join(f"--case {c}" for c in args.case)
    out = ["# What delay alone costs: the harsh training without geops, every update exact, peers' late", "",
           f"command: python3 experiments/delay_sim.py {cases} --seeds {args.seeds}",
           f"finished: {datetime.now(timezone.utc).strftime('%Y-%m-%dT%H:%M:%SZ')} "
           f"({time.time() - started:.0f} s, {args.jobs} side by side)",
           f"machine: {machine()}", f"geops: {rev}", "",
           "| case | seed | clock at 0.85 | accuracy at 500 | final accuracy | accuracy every 100 clocks |",
           "|---|---:|---:|---:|---:|---|"]
    for r in results:
        curve = " ".join(f"{c}:{a:.3f}" for c, a in r["curve"] if c % 100 == 0)
        out.append(f"| {r['case']} | {r['seed']} | {r['reached'] or '-'} | {r['at500']:.4f} | {r['final']:.4f} | {curve} |")
    out += ["", "| case | median clock at 0.85 (runs that reached it) | / lan | median final accuracy |",
            "|---|---:|---:|---:|"]
    # A run that never reached 0.85 counts as past the end, so the median is not flattered.
    medians = {case: statistics.median([r["reached"] or CLOCKS + EVAL_EVERY for r in results if r["case"] == case])
               for case in args.case}
    for case in args.case:
        rs = [r for r in results if r["case"] == case]
        hits = [r["reached"] for r in rs if r["reached"]]
        med = medians[case] if medians[case] <= CLOCKS else "never"
        ratio = f"{medians[case] / medians['lan']:.2f}x" if medians[case] <= CLOCKS else "-"
        out.append(f"| {case} | {med} ({len(hits)} of {len(rs)}) | {ratio} | "
                   f"{statistics.median(r['final'] for r in rs):.4f} |")
    text = "\n".join(out) + "\n"
    if args.table:
        with open(args.table, "w") as f:
            f.write(text)
    print(text, end="")


if __name__ == "__main__":
    main()
