"""`geops launch` running the user's own script as the workers
([training] command, workload "client"): one process per worker with the
GEOPS_* variables, its events in the summary, the final replica of every
site checked exact, and a site killed and restarted mid-run (its shards from
their stores and model files, its Python workers resuming) still ending
exact."""

import json
import os
import subprocess
import sys

from conftest import HERE, geops_bin

SCRIPT = os.path.join(HERE, "workers", "client_counter_worker.py")


def write(folder, clocks, faults=""):
    path = os.path.join(folder, "topology.toml")
    with open(path, "w") as f:
        f.write(f"""name = "python-launch"
[model]
workload = "client"
chunk_kib = 1
[training]
clocks = {clocks}
staleness = 1
command = [{json.dumps(sys.executable)}, {json.dumps(SCRIPT)}]
[storage]
data_dir = "data"
durability = "sync"
[wan]
mode = "asp"
staleness_ds = 2
[[links]]
src = "east"
dst = "west"
bandwidth_mbps = 100
delay_ms = 5
[[sites]]
name = "east"
shards = 2
workers = 2
[[sites]]
name = "west"
shards = 2
workers = 1
{faults}""")
    return path


def launch(tmp_path, topology, timeout=240, env=None):
    out = tmp_path / "out"
    proc = subprocess.run([geops_bin(), "launch", topology, "--out", str(out), "--plain", "--timeout", str(timeout)],
                          capture_output=True, text=True, timeout=timeout + 60,
                          env=None if env is None else {**os.environ, **env})
    summary_path = out / "summary.json"
    assert summary_path.exists(), proc.stdout + proc.stderr
    return proc, json.loads(summary_path.read_text()), out


def test_the_launcher_runs_the_users_script_as_every_worker(tmp_path):
    proc, summary, out = launch(tmp_path, write(str(tmp_path), clocks=20))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert summary["workers"] == 3
    assert summary["counter_expected"] == 3 * 20
    assert summary["counter_max_abs_error"] == 0.0, summary
    finals = [json.loads(l) for l in (out / "events.jsonl").read_text().splitlines() if '"final"' in l]
    checked = {e["site"] for e in finals if e.get("event") == "final" and e.get("counter_max_abs_error") == 0.0}
    assert checked == {"east", "west"}, finals
    for name in ("east-worker-0", "east-worker-1", "west-worker-0"):
        assert (out / "metrics" / f"{name}.jsonl").exists(), name
    assert summary["wan_bytes"] > 0


def test_a_site_killed_mid_run_comes_back_and_every_site_ends_exact(tmp_path):
    fault = """[[faults]]
kind = "kill-site"
site = "west"
at_clock = 15
restart_after_s = 1.0
"""
    proc, summary, out = launch(tmp_path, write(str(tmp_path), clocks=40, faults=fault))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert summary["counter_max_abs_error"] == 0.0, summary
    assert summary["counter_expected"] == 3 * 40
    restarted = [json.loads(l) for l in (out / "events.jsonl").read_text().splitlines()
                 if '"process_restarted"' in l]
    assert any(e["process"] == "west-worker-0" for e in restarted), restarted
    # The restarted script resumed where the site's stores left it, not at 0.
    starts = [json.loads(l[len("@geops "):]) for l in (out / "logs" / "west-worker-0.log").read_text().splitlines()
              if l.startswith("@geops ") and '"worker_started"' in l]
    assert len(starts) == 2 and starts[0]["clock"] == 0 and starts[1]["clock"] > 0, starts


def test_a_worker_killed_mid_run_is_restarted_and_every_replica_ends_exact(tmp_path):
    # No fault plan: the worker dies on its own (SIGKILL, after its push and
    # before its clock). The launcher restarts it while the others train on;
    # it takes its worker id at once (GEOPS_TAKEOVER) and resumes at the clock
    # its shards hold, so every update counts exactly once.
    proc, summary, out = launch(tmp_path, write(str(tmp_path), clocks=40),
                                env={"TEST_DIE_AS": "east-worker-1", "TEST_DIE_AT": "12"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert summary["exit"] == "ok"
    assert summary["counter_expected"] == 3 * 40
    assert summary["counter_max_abs_error"] == 0.0, summary
    finals = [json.loads(l) for l in (out / "events.jsonl").read_text().splitlines() if '"final"' in l]
    checked = {e["site"] for e in finals if e.get("event") == "final" and e.get("counter_max_abs_error") == 0.0}
    assert checked == {"east", "west"}, finals
    supervision = summary["supervision"]
    assert supervision["restarts_total"] == 1, supervision
    restart = supervision["restarts"][0]
    assert restart["process"] == "east-worker-1" and "signal 9" in restart["reason"], restart
    assert restart["clock_reported"] == 11 and restart["resumed_clock"] == 12, restart
    # Took its id at once: down for the restart delay and a Python start, not a 10 s lease.
    assert restart["down_seconds"] < 8, restart
    assert "restarts: 1" in proc.stdout, proc.stdout
