"""`pip install ./python` gives an importable geops anywhere: installed into
a fresh virtual environment (offline: the machine's setuptools, no index),
it trains the counter exactly from a folder outside the repository, with no
PYTHONPATH into the build tree."""

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import WORKERS, finish, worker_env

ROOT = Path(__file__).resolve().parents[2]


def test_pip_install_gives_a_geops_that_trains_the_counter(start_site, tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True, timeout=120)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    # Reuse the build tree the tests run from (a fresh install builds its own).
    env["GEOPS_BUILD_DIR"] = os.environ["GEOPS_BUILD_DIR"]
    pip = subprocess.run([str(venv / "bin" / "pip"), "install", "--no-build-isolation", "--no-index", "--no-deps",
                          str(ROOT / "python")], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=1200)
    assert pip.returncode == 0, pip.stdout + pip.stderr
    python = str(venv / "bin" / "python")
    where = subprocess.run([python, "-c", "import geops, os; print(geops.__file__); print(geops._geops.__file__)"],
                           env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert where.returncode == 0, where.stderr
    for line in where.stdout.split():
        assert line.startswith(str(venv)), where.stdout

    layers, clocks = (16, 8, 4), 5
    site = start_site(layers=layers, shards=2, workers=1, clocks=clocks)
    run_env = worker_env(site, 0, TEST_LAYERS=",".join(map(str, layers)), TEST_WORKERS=1,
                         TEST_RESULT=tmp_path / "w0.json")
    run_env.pop("PYTHONPATH", None)
    proc = subprocess.Popen([python, os.path.join(WORKERS, "counter_worker.py")], env=run_env, cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    rc, out, err = finish(proc, timeout=120)
    assert rc == 0, err
    record = json.loads((tmp_path / "w0.json").read_text())
    assert record["final_min"] == record["final_max"] == float(clocks), record
