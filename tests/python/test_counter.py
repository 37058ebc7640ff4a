"""Exactness through the Python API: two worker processes each add exactly
1.0 to every element at every clock; every element must end at
workers * clocks, exactly, and every pull must respect the SSP bound."""

import json

from conftest import events, finish, start_worker, worker_env

LAYERS = (64, 32, 8)  # fc1.weight 64x32 spans 8 chunks of 1 KiB, spread over the shards
CLOCKS = 6
WORKERS = 2


def test_every_element_ends_exact(start_site, tmp_path):
    site = start_site(layers=LAYERS, shards=2, workers=WORKERS, clocks=CLOCKS, staleness=1, chunk_kib=1)
    procs = []
    for w in range(WORKERS):
        env = worker_env(site, w, TEST_LAYERS=",".join(map(str, LAYERS)), TEST_WORKERS=WORKERS,
                         TEST_RESULT=tmp_path / f"w{w}.json", GEOPS_OUT=tmp_path / "out")
        procs.append(start_worker("counter_worker.py", env))
    for w, proc in enumerate(procs):
        rc, out, err = finish(proc, timeout=60)
        assert rc == 0, f"worker {w} failed:\n{err}"
        record = json.loads((tmp_path / f"w{w}.json").read_text())
        assert record["errors"] == []
        assert [p[0] for p in record["pulls"]] == list(range(CLOCKS))
        assert record["final_min"] == record["final_max"] == float(WORKERS * CLOCKS)
        assert record["elements"] == 64 * 32 + 32 + 32 * 8 + 8

        kinds = [e["event"] for e in events(out.splitlines())]
        assert kinds[0] == "worker_started" and kinds[-1] == "final"
        assert kinds.count("progress") == CLOCKS
        final = events(out.splitlines())[-1]
        assert final["clocks"] == CLOCKS and final["site"] == site.site and final["worker"] == w
        metrics = (tmp_path / "out" / "metrics" / f"{site.site}-worker-{w}.jsonl").read_text().splitlines()
        assert [json.loads(l)["event"] for l in metrics] == kinds
