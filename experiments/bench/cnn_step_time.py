"""cnn_step_time: what one training step of a small PyTorch CNN costs through
geops, next to the same step in plain PyTorch, measured side by side.

The model is the Fashion-MNIST CNN of examples/fashion_mnist_cnn
(fashion_mnist.Net, imported from there: two 5x5 convolutions with
max-pooling, two fully connected layers, 114,314 parameters), trained with
Adam on minibatches of Fashion-MNIST (the Debian package
dataset-fashion-mnist).

  plain   idx -> forward -> cross-entropy -> backward -> opt.step()
  geops   ps.pull() -> the same step -> ps.push() -> ps.clock()

The geops loop runs against a site this script starts itself: one `geops
site` process (1 shard, `--port 0`) of a topology with one site, one worker,
staleness 0 and `[model] workload = "client"`, so every step reads the whole
model from the shard (a real read: with one worker at staleness 0 the cache
is never fresh enough at the next clock) and sends the whole model's change
back. Both loops use the same initial model (same seed), the same sequence of
minibatches, one torch thread (as one geops worker per core would) and
Adam. They take turns at every step (with --blocks, in alternating blocks of
--steps/--blocks steps), after --warmup untimed steps of each, so slow phases
of a shared machine hit both alike. Every step is timed on its own; the figures are the
median and mean ms per step of each loop, their ratio, and for the geops loop
the time per step in pull, compute, push and clock.

Writes a Markdown report (--out, default
experiments/results/cnn_step_time.md) and prints one JSON line (prefix
"@bench ").

    /usr/bin/python3 experiments/bench/cnn_step_time.py --build build

--build is a CMake build folder holding cli/geops and the package
(python/geops, built with `geops geops_python`).
"""

import argparse
import datetime
import json
import os
import platform
import queue
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "examples", "fashion_mnist_cnn"))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import fashion_mnist  # noqa: E402  (the example's data loader and model)

EVENT_PREFIX = "@geops "


class Site:
    """One `geops site` shard on a free loopback port, stopped by stop()."""

    def __init__(self, geops_bin, topology, timeout=60):
        self.proc = subprocess.Popen([geops_bin, "site", "--topology", topology, "--site", "cnn", "--shard", "0",
                                      "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines = queue.Queue()
        self.output = []
        threading.Thread(target=self._read, daemon=True).start()
        end = time.monotonic() + timeout
        self.address = None
        while self.address is None:
            left = end - time.monotonic()
            try:
                line = self.lines.get(timeout=max(left, 0.01))
            except queue.Empty:
                line = None
            if line is None or left <= 0:
                self.stop()
                raise SystemExit("the site did not start listening:\n" + "".join(self.output))
            if line.startswith(EVENT_PREFIX):
                event = json.loads(line[len(EVENT_PREFIX):])
                if event.get("event") == "listening":
                    self.address = event["address"]

    def _read(self):
        for line in self.proc.stdout:
            self.output.append(line)
            self.lines.put(line)
        self.lines.put(None)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)


def lscpu_model():
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return platform.processor() or "unknown"
    for line in out.splitlines():
        if line.startswith("Model name:"):
            return line.split(":", 1)[1].strip()
    return "unknown"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default="build", help="CMake build folder with cli/geops and python/geops")
    parser.add_argument("--steps", type=int, default=600, help="timed steps of each loop")
    parser.add_argument("--blocks", type=int, default=None,
                        help="alternating blocks the timed steps are split into (default: --steps, i.e. the "
                             "loops take turns at every step)")
    parser.add_argument("--warmup", type=int, default=20, help="untimed steps of each loop first")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=2e-3, help="Adam learning rate (constant)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads, both loops")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", default=os.path.join(REPO, "experiments", "results", "cnn_step_time.md"))
    args = parser.parse_args()
    if args.blocks is None:
        args.blocks = args.steps
    if args.steps % args.blocks:
        raise SystemExit("--steps must be a multiple of --blocks")

    build = os.path.abspath(args.build)
    geops_bin = os.path.join(build, "cli", "geops")
    if not os.path.exists(geops_bin) or not os.path.exists(os.path.join(build, "python", "geops", "__init__.py")):
        raise SystemExit(f"{build} lacks cli/geops or python/geops: build the targets geops and geops_python there")
    sys.path.insert(0, os.path.join(build, "python"))
    import geops

    torch.set_num_threads(args.threads)
    train_x, train_y = fashion_mnist.load("train")
    data = fashion_mnist.batches(len(train_x), args.batch_size, seed=args.seed)
    batches = [next(data) for _ in range(args.warmup + args.steps)]
    per_block = args.steps // args.blocks

    # Two copies of the same initial model; each loop trains its own.
    torch.manual_seed(args.seed)
    plain_model = fashion_mnist.Net()
    torch.manual_seed(args.seed)
    geops_model = fashion_mnist.Net()
    params = fashion_mnist.parameter_count(plain_model)
    plain_opt = torch.optim.Adam(plain_model.parameters(), lr=args.lr)
    geops_opt = torch.optim.Adam(geops_model.parameters(), lr=args.lr)

    def compute(model, opt, idx):
        loss = F.cross_entropy(model(train_x[idx]), train_y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()

    plain_ms, geops_ms = [], []
    phases = {"pull": [], "compute": [], "push": [], "clock": [], "overhead": []}

    folder = tempfile.mkdtemp(prefix="cnn_step_time.")
    topology = os.path.join(folder, "topology.toml")
    with open(topology, "w") as f:
        f.write(f"""name = "cnn-step-time"
[model]
workload = "client"
chunk_kib = 16
seed = {args.seed}
[training]
clocks = {args.warmup + args.steps + 1}
staleness = 0
worker_lease_ms = 60000
rpc_timeout_ms = 60000
[[sites]]
name = "cnn"
host = "127.0.0.1"
shards = 1
workers = 1
""")
    load_before = os.getloadavg()[0]
    site = Site(geops_bin, topology)
    try:
        with geops.init(geops_model, shards=site.address, topology=topology) as ps:
            step_of = {"plain": 0, "geops": 0}

            def plain_step(timed):
                idx = batches[step_of["plain"]]
                step_of["plain"] += 1
                t0 = time.perf_counter()
                compute(plain_model, plain_opt, idx)
                if timed:
                    plain_ms.append(1000 * (time.perf_counter() - t0))

            def geops_step(timed):
                idx = batches[step_of["geops"]]
                step_of["geops"] += 1
                t0 = time.perf_counter()
                ps.pull()
                t1 = time.perf_counter()
                compute(geops_model, geops_opt, idx)
                t2 = time.perf_counter()
                ps.push()
                t3 = time.perf_counter()
                ps.clock()
                t4 = time.perf_counter()
                if timed:
                    geops_ms.append(1000 * (t4 - t0))
                    for name, a, b in (("pull", t0, t1), ("compute", t1, t2), ("push", t2, t3), ("clock", t3, t4)):
                        phases[name].append(1000 * (b - a))
                    phases["overhead"].append(1000 * ((t1 - t0) + (t4 - t2)))

            for _ in range(args.warmup):
                plain_step(False)
                geops_step(False)
            before = ps.stats()
            for block in range(args.blocks):
                # Alternate which loop goes first.
                order = (plain_step, geops_step) if block % 2 == 0 else (geops_step, plain_step)
                for step in order:
                    for _ in range(per_block):
                        step(True)
            after = ps.stats()
            # The last clock of the budget tells the shard this worker is done.
            ps.pull()
            ps.push()
            ps.clock()
    finally:
        site.stop()
        shutil.rmtree(folder, ignore_errors=True)
    load_after = os.getloadavg()[0]

    def summary(values):
        return {"median": statistics.median(values), "mean": statistics.fmean(values),
                "p10": statistics.quantiles(values, n=10)[0], "p90": statistics.quantiles(values, n=10)[-1]}

    plain_s, geops_s = summary(plain_ms), summary(geops_ms)
    phase_s = {k: summary(v) for k, v in phases.items()}
    bytes_per_step = ((after["bytes_sent"] - before["bytes_sent"]) +
                      (after["bytes_received"] - before["bytes_received"])) / args.steps
    refreshes = after["refreshes"] - before["refreshes"]
    result = {"params": params, "batch_size": args.batch_size, "steps": args.steps, "threads": args.threads,
              "plain_ms": plain_s, "geops_ms": geops_s, "phases_ms": phase_s,
              "ratio_median": geops_s["median"] / plain_s["median"], "ratio_mean": geops_s["mean"] / plain_s["mean"],
              "bytes_per_step": bytes_per_step, "refreshes": refreshes, "cache_hits": after["cache_hits"] -
              before["cache_hits"], "load_before": load_before, "load_after": load_after}
    print("@bench " + json.dumps(result), flush=True)

    def f(v):
        return f"{v:.2f}"

    command = "/usr/bin/python3 experiments/bench/cnn_step_time.py " + " ".join(
        shlex.quote(a) for a in sys.argv[1:] if not a.startswith("--out"))
    lines = [
        "# CNN step time: a PyTorch training step through geops vs. plain PyTorch",
        "",
        "One training step of the Fashion-MNIST CNN of `examples/fashion_mnist_cnn` "
        "(`fashion_mnist.Net`), through geops (one site, one worker, staleness 0) and in plain PyTorch, "
        "timed side by side in one process.",
        "",
        "## How it was run",
        "",
        "```",
        command.strip(),
        "```",
        "",
        f"- Model: `fashion_mnist.Net`, {params:,} float32 parameters in "
        f"{len(list(geops_model.parameters()))} tables ({4 * params / 1e6:.2f} MB); Adam, lr {args.lr}, "
        f"minibatches of {args.batch_size} Fashion-MNIST training images, {args.threads} torch thread(s).",
        "- " + (f"{args.steps} timed steps of each loop, the two loops taking turns at every step (plain first "
                "in even turns)" if per_block == 1 else
                f"{args.steps} timed steps of each loop in {args.blocks} alternating blocks of {per_block} "
                "(plain first in even blocks, geops first in odd ones)") +
        f", after {args.warmup} untimed steps of each; both loops start from the same initial model and "
        "see the same minibatches.",
        "- geops: one `geops site` process started by the script (1 shard on loopback, `--port 0`, in "
        "memory), `[model] workload = \"client\"`, 16 KiB chunks, staleness 0, one worker; the worker "
        "runs in this same process.",
        f"- Date: {datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}.",
        f"- Machine: `nproc` = {os.cpu_count()}, CPU model `{lscpu_model()}` (lscpu), Linux "
        f"{platform.release()}, torch {torch.__version__}. Load average (1 min) {load_before:.1f} before, "
        f"{load_after:.1f} after: other work on the machine slows both loops.",
        "",
        "## Results",
        "",
        "| loop | median ms/step | mean ms/step | p10 | p90 |",
        "|---|---|---|---|---|",
        f"| plain PyTorch | {f(plain_s['median'])} | {f(plain_s['mean'])} | {f(plain_s['p10'])} | {f(plain_s['p90'])} |",
        f"| through geops | {f(geops_s['median'])} | {f(geops_s['mean'])} | {f(geops_s['p10'])} | {f(geops_s['p90'])} |",
        "",
        f"**geops / plain: {result['ratio_median']:.3f}** (ratio of the medians; of the means "
        f"{result['ratio_mean']:.3f}). geops adds {phase_s['overhead']['median']:.2f} ms per step "
        f"(median of pull + push + clock), {100 * phase_s['overhead']['median'] / plain_s['median']:.1f}% of "
        "the plain step's median.",
        "",
        "Where a geops step's time goes (ms per step):",
        "",
        "| phase | median | mean |",
        "|---|---|---|",
    ]
    for name, what in (("pull", "`ps.pull()`: read the whole model from the shard, copy it into the parameters"),
                       ("compute", "forward, backward, `opt.step()` (the plain loop's whole step)"),
                       ("push", "`ps.push()`: NaN/Inf check, parameter - pulled value into the op-log"),
                       ("clock", "`ps.clock()`: send the update batch, advance the clock"),
                       ("overhead", "pull + push + clock of the same step: what geops adds")):
        lines.append(f"| {name}: {what} | {f(phase_s[name]['median'])} | {f(phase_s[name]['mean'])} |")
    lines += [
        "",
        f"Bytes on the worker's connections per step: {bytes_per_step / 1e3:.0f} kB (sent + received, "
        f"framing included); {refreshes} reads from the shard and {result['cache_hits']} cache hits in "
        f"{args.steps} timed steps.",
        "",
        "## What the figures mean",
        "",
        "- **ms/step**: wall time of one step, timed around the step alone (picking the minibatch's indices "
        "is outside; indexing the images is inside). plain = forward + cross-entropy + backward + Adam step; "
        "geops = the same plus pull, push and clock. p10 / p90: the 10th and 90th percentiles over the steps.",
        "- **geops / plain**: the ratio of the median step times: 1.0 would be no overhead.",
        "- **pull, push, clock**: the geops step's phases; compute is the plain step inside the geops loop, "
        "so (pull + push + clock) is the overhead geops adds to each step on one machine, and compute "
        "differing from plain's step shows how much the machine's load moved during the run.",
        "- With one worker at staleness 0 every pull waits for nothing but the RPC: the read at clock c "
        "needs the shard at clock c, which this worker's own clock() has just reached. With several "
        "workers, a pull also waits for the slowest worker (staleness 0) or not at all (staleness > 0 "
        "reads from the cache when it is fresh enough).",
        "- The site process runs on the same cores as the worker: every pull and clock waits until it has "
        "been scheduled to answer, so on a busy machine the overhead grows with the load, "
        "while on an idle one it is the transfer of "
        f"{4 * params / 1e6:.2f} MB each way and the two copies over the model.",
        "",
    ]
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as out:
        out.write("\n".join(lines))
    print(f"plain {plain_s['median']:.2f} ms/step, geops {geops_s['median']:.2f} ms/step "
          f"(pull {phase_s['pull']['median']:.2f}, compute {phase_s['compute']['median']:.2f}, "
          f"push {phase_s['push']['median']:.2f}, clock {phase_s['clock']['median']:.2f}); "
          f"ratio {result['ratio_median']:.3f}; wrote {args.out}", flush=True)


if __name__ == "__main__":
    main()
