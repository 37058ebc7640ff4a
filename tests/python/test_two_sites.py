"""A model of the workers' own (workload "client") through two sites linked
by the WAN layer: every site starts from the first worker's initial values,
updates replicate exactly, a torch model trains to the same parameters at
both sites, and a site whose workers bring another model is refused naming
the table that differs."""

import json

import pytest
import torch
from torch import nn

import geops
from conftest import events, finish, start_worker, worker_env

SITES = ("east", "west")


def run_workers(sites, script, tmp_path, workers, timeout=180, **extra):
    """Starts `workers` processes per site running `script`; returns their results in order."""
    procs = []
    for name, site in sites.items():
        for w in range(workers):
            result = tmp_path / f"{name}-{w}.json"
            procs.append((f"{name}/{w}", result,
                          start_worker(script, worker_env(site, w, TEST_RESULT=result, **extra))))
    results = []
    for who, result, proc in procs:
        rc, out, err = finish(proc, timeout=timeout)
        assert rc == 0, f"worker {who} failed:\n{err}"
        results.append((who, json.loads(result.read_text()), events(out.splitlines())))
    return results


def test_every_site_counts_exactly_from_the_first_workers_initial_values(start_sites, tmp_path):
    clocks, workers = 8, 2
    sites = start_sites(SITES, workload="client", shards=2, workers=workers, clocks=clocks, staleness=1,
                        chunk_kib=1)
    results = run_workers(sites, "client_counter_worker.py", tmp_path, workers,
                          TEST_SEED=7)
    for who, record, _ in results:
        assert record["clocks"] == clocks, who
        assert record["max_abs_error"] == 0.0, f"{who}: {record}"


def test_a_torch_model_trains_to_the_same_parameters_at_both_sites(start_sites, tmp_path):
    sites = start_sites(SITES, workload="client", shards=2, workers=1, clocks=80, staleness=1, chunk_kib=1)
    results = run_workers(sites, "client_train_worker.py", tmp_path, workers=1)
    def curves():   # every site's loss at each clock, and when it ended, for a failure to show
        t0 = min(r["times"][0] for _, r, _ in results)
        return "\n".join(f"{w}: " + " ".join(f"{x:.2f}@{t - t0:.2f}s" for x, t in zip(r["losses"], r["times"]))
                         for w, r, _ in results)

    for who, record, evs in results:
        first, last = sum(record["losses"][:5]) / 5, sum(record["losses"][-5:]) / 5
        assert last < 0.5 * first, f"{who}: loss did not fall: {first} -> {last}\n{curves()}"
        assert evs[-1]["event"] == "final", who
    east = torch.tensor([v for t in results[0][1]["params"] for v in t])
    west = torch.tensor([v for t in results[1][1]["params"] for v in t])
    assert torch.allclose(east, west, atol=1e-5), float((east - west).abs().max())


def seeded_model(seed, hidden=5):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(6, hidden), nn.ReLU(), nn.Linear(hidden, 3))


def init_at(site, worker, model):
    return geops.init(model, site=site.site, worker=worker, shards=site.addresses, topology=site.topology)


def test_a_site_whose_worker_brings_other_initial_values_is_refused(start_sites):
    sites = start_sites(SITES, workload="client", workers=1, clocks=3)
    first = init_at(sites["east"], 0, seeded_model(7))
    try:
        with pytest.raises(geops.FailedPreconditionError,
                           match=r"site east trains: table '0.weight' has other initial values"):
            init_at(sites["west"], 0, seeded_model(8))
    finally:
        first.close()


def test_a_site_whose_worker_brings_another_shape_is_refused(start_sites):
    sites = start_sites(SITES, workload="client", workers=1, clocks=3)
    first = init_at(sites["east"], 0, seeded_model(7))
    try:
        with pytest.raises(geops.FailedPreconditionError,
                           match=r"site east trains: table '0.weight' has shape 5x6 there, 4x6 here"):
            init_at(sites["west"], 0, seeded_model(7, hidden=4))
    finally:
        first.close()


def test_two_sites_whose_first_workers_bring_different_models_at_once_never_both_train(start_sites, tmp_path):
    # Both sites' first workers register at the same moment. A site fixes a
    # model before it asks its peers, so at least one of the two finds the
    # other's and refuses its worker naming the table; they never both train.
    sites = start_sites(SITES, workload="client", workers=1, clocks=400, staleness=0, lease_ms=2000)
    script = tmp_path / "worker.py"
    script.write_text("""
import os, sys, torch
from torch import nn
import geops
torch.manual_seed(int(os.environ["TEST_SEED"]))
model = nn.Sequential(nn.Linear(6, 5), nn.ReLU(), nn.Linear(5, 3))
try:
    with geops.init(model) as ps:
        for step in ps.steps():
            ps.pull(); ps.push(); ps.clock()
except geops.FailedPreconditionError as e:
    print("REFUSED", e.message, flush=True)
    sys.exit(3)
""")
    import subprocess, sys
    procs = [subprocess.Popen([sys.executable, str(script)],
                              env=worker_env(site, 0, TEST_SEED=7 + i),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i, site in enumerate(sites.values())]
    outcomes = [finish(p, timeout=120) for p in procs]
    refused = [out for rc, out, _ in outcomes if rc == 3]
    assert refused, f"no worker was refused: {outcomes}"
    assert all(rc in (0, 3) for rc, _, _ in outcomes), outcomes
    for out in refused:
        assert "has other initial values" in out and "'0.weight'" in out, out
