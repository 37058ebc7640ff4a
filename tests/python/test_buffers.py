"""BatchNorm's running statistics are synchronised: the shards keep each
buffer as the average over every worker of every site, so every site ends
with, and evaluates, the same model."""

import json

import pytest

from conftest import finish, start_worker, worker_env

SITES = ("east", "west")


def test_running_statistics_are_the_average_of_every_worker_and_equal_at_every_site(start_sites, tmp_path):
    # Worker inputs centred on 0 (east) and 4 (west): alone, each site's
    # running_mean would end near its own offset. Synchronised, each buffer
    # is its initial value plus every worker's own changes scaled by
    # 1/world_size, the same at both sites. Where between the offsets it
    # ends depends on how the two sites' steps interleave (each reads its
    # own changes before the other's), so that is bounded loosely; the sum
    # is checked exactly.
    clocks = 60
    sites = start_sites(SITES, workload="client", shards=1, workers=1, clocks=clocks, staleness=1)
    procs = []
    for offset, (name, site) in zip((0.0, 4.0), sites.items()):
        result = tmp_path / f"{name}.json"
        procs.append((name, result, start_worker("bn_worker.py", worker_env(site, 0, TEST_RESULT=result,
                                                                               TEST_OFFSET=offset))))
    records = {}
    for name, result, proc in procs:
        rc, out, err = finish(proc, timeout=180)
        assert rc == 0, f"{name} failed:\n{err}"
        records[name] = json.loads(result.read_text())
    east, west = records["east"], records["west"]
    for a, b in zip(east["running_mean"], west["running_mean"]):
        assert a == pytest.approx(b, abs=1e-5), (east["running_mean"], west["running_mean"])
    for a, b in zip(east["running_var"], west["running_var"]):
        assert a == pytest.approx(b, abs=1e-5), (east["running_var"], west["running_var"])
    for pa, pb in zip(east["params"], west["params"]):
        assert pa == pytest.approx(pb, abs=1e-5)
    world_size = len(records)
    for name, initial in (("running_mean", 0.0), ("running_var", 1.0)):
        expected = [initial + sum(r["own_change"][name][i] for r in records.values()) / world_size
                    for i in range(4)]
        assert east[name] == pytest.approx(expected, abs=1e-4), (name, east[name], expected)
    for m in east["running_mean"]:
        assert 0.8 < m < 3.2, east["running_mean"]
    # The variance of the mix of both sites' inputs (about 1 + 2^2 = 5) is
    # not what either site sees alone (about 1): the workers' average of
    # their own running_var is, since each one's is taken around its own
    # mean; it stays near 1.
    for v in east["running_var"]:
        assert 0.5 < v < 1.8, east["running_var"]


def test_save_writes_the_sites_replica_as_a_state_dict_and_keeps_the_local_change_check(start_site, tmp_path):
    import torch
    from torch import nn

    import geops
    site = start_site(workload="client", shards=2, workers=1, clocks=20)
    torch.manual_seed(5)
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Linear(4, 2))
    with geops.init(model, site=site.site, worker=0, shards=site.addresses, topology=site.topology) as ps:
        for _ in range(3):
            ps.pull()
            model.train()
            model(torch.randn(8, 3)).sum().backward()
            with torch.no_grad():
                for p in model.parameters():
                    p -= 0.1 * p.grad
                    p.grad = None
            ps.push()
            ps.clock()
        expected = {k: v.detach().clone() for k, v in model.state_dict().items()}
        # An unpushed step in the model: save reads the replica, not the model.
        with torch.no_grad():
            model[0].weight += 1.0
        path = ps.save(tmp_path / "model.pt")
        saved = torch.load(path)
        assert set(saved) == set(expected)
        for name, value in expected.items():
            assert torch.allclose(saved[name], value, atol=1e-6), name
        assert saved["1.num_batches_tracked"].item() == 3  # an integer buffer: this worker's own
        fresh = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Linear(4, 2))
        fresh.load_state_dict(saved)
        # The model's tensors were left alone, and the step in them still may not be lost silently.
        with pytest.raises(geops.FailedPreconditionError, match="'0.weight' changed"):
            ps.pull()
        try:
            import safetensors  # noqa: F401
        except ImportError:
            with pytest.raises(geops.FailedPreconditionError, match="safetensors package"):
                ps.save(tmp_path / "model.safetensors")
        ps.close(final=False)
