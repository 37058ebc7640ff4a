"""Each failure reaches the caller as the geops exception of its status code,
with a message that says what is wrong; never a crash or a hang."""

import math
import os
import sys
import threading
import time

import pytest
import torch

import geops

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "workers"))
from models import Mlp  # noqa: E402


def connect(site, worker=0, model=None, **settings):
    settings.setdefault("topology", site.topology)
    return geops.init(model if model is not None else Mlp((4, 3, 2)), site=site.site, worker=worker,
                      shards=site.addresses, **settings)


def test_every_status_code_has_its_class():
    for code in geops._geops.status_code_names():
        cls = geops.errors._BY_CODE[code]
        assert issubclass(cls, geops.GeopsError) and cls.code == code
    assert issubclass(geops.UnavailableError, ConnectionError)
    assert issubclass(geops.InvalidArgumentError, ValueError)


def test_dead_shard_gives_unavailable_within_the_retry_window(start_site):
    site = start_site(shards=2, workers=1, clocks=10)
    with connect(site, retry_window_ms=1500, retry_backoff_ms=50) as ps:
        ps.pull()
        ps.push()
        ps.clock()
        site.kill_shard(1)
        start = time.monotonic()
        with pytest.raises(geops.UnavailableError) as err:
            ps.pull(staleness=0)  # goes to the shards, whatever the cache holds
        assert time.monotonic() - start < 10
        assert time.monotonic() - start >= 1.4
        assert "shard 1 after" in str(err.value) and "retry window 1 s" in str(err.value)
        with pytest.raises(geops.UnavailableError, match="shard 1"):
            ps.clock()
        ps.close(final=False)


def test_a_worker_waits_for_a_shard_restarted_within_the_window(start_site):
    # The shard comes back from its store 2 s later, as a supervisor would
    # restart it: the worker's read waits instead of failing.
    site = start_site(shards=2, workers=1, clocks=10, storage=True)
    with connect(site, retry_window_ms=60000, retry_backoff_ms=50) as ps:
        ps.pull()
        ps.push()
        ps.clock()
        site.kill_shard(1)
        threading.Timer(2.0, site.restart_shard, args=(1,)).start()
        start = time.monotonic()
        ps.pull(staleness=0)   # waits out the restart instead of failing
        assert time.monotonic() - start >= 1.5
        assert ps.stats()["retries"] > 0
        ps.close(final=False)


def test_nan_is_refused_before_sending(start_site):
    site = start_site(workers=1, clocks=10)
    model = Mlp((4, 3, 2))
    with connect(site, model=model) as ps:
        ps.pull()
        with torch.no_grad():
            model.fc1.weight += 1.0
            model.fc2.bias[0, 1] = math.nan
        with pytest.raises(geops.InvalidArgumentError) as err:
            ps.push()
        msg = str(err.value)
        assert "'fc2.bias'" in msg and "nan" in msg and "row 0, col 1" in msg
        # Nothing was staged, and a clock now would lose the change without a
        # word: refused. Dropping it on purpose, the clock ships nothing.
        with pytest.raises(geops.FailedPreconditionError, match="never pushed"):
            ps.clock()
        ps.pull(discard=True)
        ps.clock()
        ps.pull(staleness=0)
        assert all(float(p.abs().max()) == 0.0 for p in model.parameters())
        # An infinite value is refused the same way.
        with torch.no_grad():
            model.fc1.bias[0, 2] = -math.inf
        with pytest.raises(geops.InvalidArgumentError, match=r"'fc1.bias' holds -inf"):
            ps.push()


@pytest.mark.parametrize("layers", [(301, 37, 2), (2049, 1025, 2)])
def test_a_bad_value_anywhere_in_a_large_parameter_is_found_and_good_deltas_arrive_exactly(start_site, layers):
    # push checks and subtracts in vectorised blocks with a scalar head and
    # tail, so bad values are put in the middle of a block, at the very end
    # and at the start. The second model (8 MiB) is large enough for pull and
    # push to use streaming stores (worker/stream_copy.h).
    site = start_site(workers=1, clocks=10, layers=layers)
    model = Mlp(layers)
    w = model.fc1.weight
    with connect(site, model=model) as ps:
        ps.pull()
        for element, bad, shown in ((5003, math.nan, "nan"), (w.numel() - 1, math.inf, "inf"), (0, -math.inf, "-inf")):
            saved = w.view(-1)[element].item()
            with torch.no_grad():
                w.view(-1)[element] = bad
            with pytest.raises(geops.InvalidArgumentError) as err:
                ps.push()
            row, col = divmod(element, w.shape[1])
            assert f"'fc1.weight' holds {shown} at element {element} (row {row}, col {col})" in str(err.value)
            with torch.no_grad():
                w.view(-1)[element] = saved
        # Arbitrary deltas reach the shard exactly: twice, the values are set
        # at random, pushed and clocked, and a fresh pull gives the pulled
        # values plus (new - pulled), each rounded to float32 as the shard adds.
        generator = torch.Generator().manual_seed(7)
        for _ in range(2):
            pulled = [p.detach().clone() for p in model.parameters()]
            with torch.no_grad():
                for p in model.parameters():
                    p.copy_(torch.randn(p.shape, generator=generator))
            expected = [old + (p.detach() - old) for p, old in zip(model.parameters(), pulled)]
            ps.push()
            ps.clock()
            with torch.no_grad():
                for p in model.parameters():
                    p.zero_()
            ps.pull(staleness=0, discard=True)  # the zeros are there to see the pull write
            for p, want in zip(model.parameters(), expected):
                assert torch.equal(p.detach(), want)


def test_refused_repeated_push_keeps_the_staged_delta(start_site):
    site = start_site(workers=1, clocks=10)
    model = Mlp((4, 3, 2))
    with connect(site, model=model) as ps:
        ps.pull()
        with torch.no_grad():
            model.fc1.weight += 1.0
        ps.push()
        with torch.no_grad():
            model.fc1.weight += 1.0
            model.fc2.weight[1, 0] = math.inf
        with pytest.raises(geops.InvalidArgumentError, match=r"'fc2.weight' holds inf at element 2 \(row 1, col 0\)"):
            ps.push()
        # The changes after the first push would be lost: the clock says so.
        with pytest.raises(geops.FailedPreconditionError, match="'fc1.weight' changed after push"):
            ps.clock()
        # Undone, the first push's delta is still the staged one.
        with torch.no_grad():
            model.fc1.weight -= 1.0
            model.fc2.weight[1, 0] = 0.0
        ps.clock()
        ps.pull(staleness=0)
        assert float(model.fc1.weight.min()) == 1.0 and float(model.fc1.weight.max()) == 1.0
        assert float(model.fc2.weight.abs().max()) == 0.0


def test_float64_parameter_is_named(start_site):
    site = start_site(workers=1)
    with pytest.raises(geops.InvalidArgumentError, match=r"parameter 'fc1.weight' is torch.float64"):
        connect(site, model=Mlp((4, 3, 2)).double())
    model = Mlp((4, 3, 2))
    with connect(site, model=model) as ps:
        model.fc2.weight.data = model.fc2.weight.data.double()
        with pytest.raises(geops.InvalidArgumentError, match=r"parameter 'fc2.weight' is torch.float64"):
            ps.push()
        with pytest.raises(geops.InvalidArgumentError, match=r"parameter 'fc2.weight'"):
            ps.pull()


def test_model_mismatch_names_the_table(start_site):
    site = start_site(layers=(4, 3, 2), workers=1)
    with pytest.raises(geops.FailedPreconditionError, match=r"table 'fc1.weight' is 4x5 .* 4x3"):
        connect(site, model=Mlp((4, 5, 2)))
    with pytest.raises(geops.FailedPreconditionError, match=r"'fc3.weight', which the site's model lacks"):
        connect(site, model=Mlp((4, 3, 2, 2)))
    # Without the topology the client brings its own model; a site of a built-in model refuses it.
    with pytest.raises(geops.FailedPreconditionError, match="built-in model"):
        connect(site, model=Mlp((4, 5, 2)), topology="")


def test_reshaped_parameter_is_refused(start_site):
    site = start_site(workers=1)
    model = Mlp((4, 3, 2))
    with connect(site, model=model) as ps:
        model.fc1.bias.data = torch.zeros(1, 4)
        with pytest.raises(geops.InvalidArgumentError, match=r"parameter 'fc1.bias' has 4 elements; its table is 1x3"):
            ps.push()


def test_call_order_is_checked(start_site):
    site = start_site(workers=1, clocks=3)
    with connect(site) as ps:
        ps.pull()
        ps.push()
        with pytest.raises(geops.FailedPreconditionError, match="pull\\(\\) after push\\(\\)"):
            ps.pull()
        ps.clock()
        with pytest.raises(geops.FailedPreconditionError, match="without ps.clock"):
            for _ in ps.steps():
                pass
    with pytest.raises(geops.FailedPreconditionError, match="session is closed"):
        ps.pull()


def test_slow_peer_gives_deadline_exceeded_naming_it_after_the_retry_window(start_site):
    site = start_site(workers=2, lease_ms=60000)
    with connect(site, worker=1, rpc_timeout_ms=60000), \
            connect(site, worker=0, rpc_timeout_ms=1000, retry_window_ms=3000) as ps:
        ps.pull()
        ps.push()
        ps.clock()
        start = time.monotonic()
        with pytest.raises(geops.DeadlineExceededError) as err:
            ps.pull()  # clock 1 under BSP needs worker 1 at clock 1
        # Held for one rpc_timeout at a time and asked again, up to the window.
        assert 2.5 < time.monotonic() - start < 15
        assert ps.stats()["retries"] >= 2
        assert "held back by" in str(err.value) and "worker 1" in str(err.value)


def test_a_read_held_past_the_rpc_timeout_waits_for_a_live_peer(start_site):
    site = start_site(workers=2, lease_ms=60000)
    with connect(site, worker=1, rpc_timeout_ms=60000) as slow, connect(site, worker=0, rpc_timeout_ms=1000) as ps:
        for c in (ps, slow):
            c.pull()
            c.push()
        ps.clock()
        # Worker 1 is alive (heartbeats) but reaches clock 1 only after three
        # of worker 0's read deadlines: the read waits instead of failing.
        timer = threading.Timer(3.0, slow.clock)
        timer.start()
        start = time.monotonic()
        ps.pull()
        assert time.monotonic() - start >= 2.5
        assert ps.stats()["retries"] >= 2
        timer.join()  # slow.clock() may still be on its way back when the read returns


def test_closing_a_session_while_another_thread_is_in_a_call_does_not_crash(start_site):
    site = start_site(workers=2, lease_ms=60000)
    with connect(site, worker=1, rpc_timeout_ms=60000) as other:
        ps = connect(site, worker=0, rpc_timeout_ms=1000, retry_window_ms=2000)
        for c in (ps, other):
            c.pull()
            c.push()
        ps.clock()
        raised = []

        def read():  # waits for worker 1 at clock 1, which never comes
            try:
                ps.pull()
            except geops.GeopsError as e:
                raised.append(e)

        reader = threading.Thread(target=read)
        reader.start()
        time.sleep(0.5)
        ps.close(final=False)  # returns at once; the read in progress keeps the client until it ends
        reader.join(timeout=30)
        assert not reader.is_alive()
        assert len(raised) == 1 and isinstance(raised[0], geops.DeadlineExceededError)
        with pytest.raises(geops.FailedPreconditionError):
            ps.pull()


def test_bad_settings_are_named(monkeypatch):
    monkeypatch.setenv("GEOPS_WORKER", "two")
    with pytest.raises(geops.InvalidArgumentError, match="GEOPS_WORKER='two' is not an integer"):
        geops.init(Mlp((4, 3, 2)), shards="127.0.0.1:1")
    monkeypatch.delenv("GEOPS_WORKER")
    monkeypatch.delenv("GEOPS_SHARDS", raising=False)
    monkeypatch.delenv("GEOPS_TOPOLOGY", raising=False)
    with pytest.raises(geops.InvalidArgumentError, match="no shard addresses"):
        geops.init(Mlp((4, 3, 2)))
