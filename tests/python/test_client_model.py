"""A site whose workers bring the model (topology workload "client"): the
first worker's own initial values become every replica's start, updates on
top of them stay exact, and a worker whose model was built from another seed
is refused naming the table."""

import pytest
import torch

from torch import nn

import geops


def seeded_model(seed):
    """A model as a user builds it: torch's own random initialisation."""
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(6, 5), nn.ReLU(), nn.Linear(5, 3))


def test_the_workers_own_values_start_the_site_and_updates_stay_exact(start_site):
    site = start_site(workload="client", workers=1, clocks=3, shards=2, chunk_kib=1)
    model = seeded_model(7)
    initial = {n: p.detach().clone() for n, p in model.named_parameters()}
    assert any(v.abs().sum() > 0 for v in initial.values())  # not zeros: torch's own init
    with geops.init(model, site=site.site, worker=0, shards=site.addresses, topology=site.topology) as ps:
        for _ in ps.steps():
            ps.pull()
            with torch.no_grad():
                for p in model.parameters():
                    p.add_(1.0)
            ps.push()
            ps.clock()
        ps.pull(staleness=0)
        for name, p in model.named_parameters():
            expected = initial[name] + 1.0 + 1.0 + 1.0
            assert torch.equal(p.detach(), expected), name


def test_a_worker_with_other_initial_values_is_told_which_table(start_site):
    site = start_site(workload="client", workers=2, clocks=3)
    first = geops.init(seeded_model(7), site=site.site, worker=0, shards=site.addresses, topology=site.topology)
    try:
        with pytest.raises(geops.FailedPreconditionError, match=r"table '0.weight' has other initial values"):
            geops.init(seeded_model(8), site=site.site, worker=1, shards=site.addresses, topology=site.topology)
    finally:
        first.close()
