"""A real PyTorch model trained by two worker processes through one site:
the loss falls, and both workers end with the same parameters (the site's)."""

import json

from conftest import events, finish, start_worker, worker_env

LAYERS = (8, 16, 4)
CLOCKS = 60


def test_two_processes_train_one_model(start_site, tmp_path):
    site = start_site(layers=LAYERS, shards=2, workers=2, clocks=CLOCKS, staleness=1)
    procs = [start_worker("train_worker.py",
                          worker_env(site, w, TEST_LAYERS=",".join(map(str, LAYERS)),
                                     TEST_RESULT=tmp_path / f"w{w}.json"))
             for w in range(2)]
    results = []
    for w, proc in enumerate(procs):
        rc, out, err = finish(proc, timeout=120)
        assert rc == 0, f"worker {w} failed:\n{err}"
        results.append(json.loads((tmp_path / f"w{w}.json").read_text()))
        evs = events(out.splitlines())
        assert sum(e["event"] == "progress" for e in evs) == CLOCKS + 1
        assert any(e["event"] == "eval" and e["test_loss"] is not None for e in evs)
        assert evs[-1]["event"] == "final" and evs[-1]["examples"] == 32 * CLOCKS
    for r in results:
        first, last = sum(r["losses"][:5]) / 5, sum(r["losses"][-5:]) / 5
        assert last < 0.5 * first, f"loss did not fall: {first} -> {last}"
    assert results[0]["params"] == results[1]["params"]
    assert results[0]["eval_loss"] == results[1]["eval_loss"]
