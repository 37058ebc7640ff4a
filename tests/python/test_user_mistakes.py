"""Ordinary mistakes of a user's training loop or start-up get an error that
says what to do, never a silently wrong result:
- a pull after a step that was not pushed would discard the step;
- a clock after a step that was not pushed, or changed after the push;
- two processes that both think they are worker 0 (torchrun's RANK, no
  GEOPS_WORKER) would each apply half the updates;
- torchrun's RANK / LOCAL_RANK / WORLD_SIZE are honoured, and a conflict with
  GEOPS_* is refused."""

import os
import sys

import pytest
import torch

import geops
from conftest import finish, start_worker, worker_env

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "workers"))
from models import Mlp  # noqa: E402


def connect(site, worker=0, model=None, **settings):
    settings.setdefault("topology", site.topology)
    return geops.init(model if model is not None else Mlp((4, 3, 2)), site=site.site, worker=worker,
                      shards=site.addresses, **settings)


def step(model, by=1.0):
    with torch.no_grad():
        for p in model.parameters():
            p += by


def ship_and_expect(ps, model, value):
    """Pushes, clocks and reads back: every element of fc1.weight must be `value`."""
    ps.push()
    ps.clock()
    ps.pull(staleness=0)
    assert float(model.fc1.weight.min()) == float(model.fc1.weight.max()) == value
    ps.close(final=False)


def test_a_pull_after_an_unpushed_step_is_refused_and_the_step_survives(start_site):
    site = start_site(shards=2, workers=1, clocks=10)
    model = Mlp((4, 3, 2))
    with connect(site, model=model) as ps:
        ps.pull()
        step(model)
        with pytest.raises(geops.FailedPreconditionError) as err:
            ps.pull()
        message = str(err.value)
        assert "fc1.weight" in message and "push()" in message and "discard=True" in message, message
        # Nothing was overwritten: the step is still there, and pushing it works.
        assert float(model.fc1.weight.min()) == 1.0
        ship_and_expect(ps, model, 1.0)


def test_pull_discard_drops_an_unpushed_change_on_purpose(start_site):
    site = start_site(shards=1, workers=1, clocks=10)
    model = Mlp((4, 3, 2))
    with connect(site, model=model) as ps:
        ps.pull()
        step(model, 5.0)
        ps.pull(discard=True)
        assert float(model.fc2.bias.abs().max()) == 0.0
        ps.close(final=False)


def test_an_ordinary_loop_is_never_refused(start_site):
    # pull, step, push, clock, and the pull of the next step: the values the
    # clock left (pulled + delta, rounded by the shard's own additions) are
    # not mistaken for a local change.
    site = start_site(shards=2, workers=1, clocks=30)
    model = Mlp((4, 3, 2))
    torch.manual_seed(3)
    with connect(site, model=model) as ps:
        for _ in ps.steps():
            ps.pull()
            step(model, float(torch.randn(())) * 1e-3)
            ps.push()
            ps.clock()
        ps.pull(staleness=0)


def test_a_clock_that_would_lose_a_step_is_refused(start_site):
    site = start_site(shards=1, workers=1, clocks=10)
    model = Mlp((4, 3, 2))
    with connect(site, model=model) as ps:
        ps.pull()
        step(model)
        with pytest.raises(geops.FailedPreconditionError, match="never pushed"):
            ps.clock()  # no push in this clock
        ps.push()
        step(model)  # a change after the push
        with pytest.raises(geops.FailedPreconditionError, match="changed after push"):
            ps.clock()
        assert ps.current_clock == 0
        ship_and_expect(ps, model, 2.0)  # the push takes both steps


def test_a_second_live_process_as_the_same_worker_is_refused_naming_the_holder(start_site):
    site = start_site(shards=2, workers=2, clocks=10)
    with connect(site, worker=0):
        with pytest.raises(geops.AlreadyExistsError) as err:
            connect(site, worker=0, held_id_wait_ms=1500)
        message = str(err.value)
        assert f"pid {os.getpid()}" in message and "already live" in message, message
        assert "own worker id" in message, message


def test_torchrun_ranks_give_distinct_workers_and_every_update_counts(start_site, tmp_path):
    # Two processes started as torchrun starts them (RANK, LOCAL_RANK,
    # WORLD_SIZE; no GEOPS_WORKER): each must be its own worker, so the
    # counter ends at 2 x clocks everywhere, not at clocks.
    layers = (16, 8, 4)
    clocks = 8
    # A worker not registered yet holds the others only for the lease from
    # the shards' start: a long one, so that a rank slow to start on a busy
    # machine is still waited for (geops does not yet wait for the
    # topology's workers beyond it).
    site = start_site(layers=layers, shards=2, workers=2, clocks=clocks, staleness=1, lease_ms=60000)
    procs = []
    for rank in range(2):
        env = worker_env(site, 0, TEST_LAYERS=",".join(map(str, layers)), TEST_WORKERS=2,
                         TEST_RESULT=tmp_path / f"r{rank}.json", RANK=rank, LOCAL_RANK=rank, WORLD_SIZE=2)
        del env["GEOPS_WORKER"]
        procs.append(start_worker("counter_worker.py", env))
    import json
    for rank, proc in enumerate(procs):
        rc, out, err = finish(proc, timeout=90)
        assert rc == 0, f"rank {rank} failed:\n{err}"
        record = json.loads((tmp_path / f"r{rank}.json").read_text())
        assert record["final_min"] == record["final_max"] == float(2 * clocks), record


def test_torchrun_variables_resolve_to_the_worker_and_conflicts_are_refused(tmp_path):
    from conftest import write_topology
    topo = write_topology(str(tmp_path), sites=["east", "west"], workers=2)
    env = {"GEOPS_TOPOLOGY": topo, "GEOPS_SHARDS": "127.0.0.1:1"}
    # Over every site: RANK 3 of 4 is worker 1 of the second site.
    cfg = geops.resolve(environ={**env, "RANK": "3", "WORLD_SIZE": "4"})
    assert (cfg.site, cfg.worker, cfg.rank, cfg.world_size) == ("west", 1, 3, 4)
    # torchrun per site: LOCAL_RANK within the named site.
    cfg = geops.resolve(environ={**env, "GEOPS_SITE": "east", "RANK": "1", "LOCAL_RANK": "1", "WORLD_SIZE": "2"})
    assert (cfg.site, cfg.worker) == ("east", 1)
    # GEOPS_* and torchrun agree: fine.
    cfg = geops.resolve(environ={**env, "GEOPS_SITE": "west", "GEOPS_WORKER": "0", "RANK": "2", "WORLD_SIZE": "4"})
    assert (cfg.site, cfg.worker) == ("west", 0)
    # They disagree: an error naming both.
    with pytest.raises(geops.InvalidArgumentError) as err:
        geops.resolve(environ={**env, "GEOPS_SITE": "west", "GEOPS_WORKER": "0", "LOCAL_RANK": "1"})
    assert "LOCAL_RANK=1" in str(err.value) and "GEOPS_WORKER=0" in str(err.value), str(err.value)
    with pytest.raises(geops.InvalidArgumentError, match="RANK=1"):
        geops.resolve(environ={**env, "GEOPS_SITE": "west", "GEOPS_WORKER": "0", "RANK": "1", "WORLD_SIZE": "4"})
    with pytest.raises(geops.InvalidArgumentError, match="WORLD_SIZE=3"):
        geops.resolve(environ={**env, "RANK": "1", "WORLD_SIZE": "3"})
    with pytest.raises(geops.InvalidArgumentError, match="not an integer"):
        geops.resolve(environ={**env, "GEOPS_SITE": "east", "LOCAL_RANK": "x"})


def test_config_carries_the_topologys_learning_rate_schedule_and_batch_size(tmp_path):
    from conftest import write_topology
    topo = write_topology(str(tmp_path), clocks=11)
    text = open(topo).read().replace("[training]\n", "[training]\nlearning_rate = 0.1\nfinal_learning_rate = 0.02\n"
                                                    "batch_size = 64\n")
    with open(topo, "w") as f:
        f.write(text)
    cfg = geops.resolve(environ={"GEOPS_TOPOLOGY": topo, "GEOPS_SHARDS": "127.0.0.1:1"})
    assert (cfg.learning_rate, cfg.final_learning_rate, cfg.batch_size) == (0.1, 0.02, 64)
    assert cfg.lr_at(0) == pytest.approx(0.1)
    assert cfg.lr_at(5) == pytest.approx(0.06)   # half way down the half cosine
    assert cfg.lr_at(10) == pytest.approx(0.02)
    assert cfg.lr_at(99) == pytest.approx(0.02)
    bare = geops.resolve(environ={"GEOPS_SHARDS": "127.0.0.1:1"})
    assert bare.learning_rate is None
    with pytest.raises(geops.InvalidArgumentError, match="no topology"):
        bare.lr_at(0)
