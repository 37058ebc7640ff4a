"""Fixtures for the geops Python package tests: real `geops site` processes on
loopback and worker processes, every wait bounded.

Environment (set by CTest, tests/python/CMakeLists.txt): GEOPS_BIN, the geops
binary; PYTHONPATH, the build's package folder.

Sites use a "counter" topology (all tables start at zero) whose MLP layers
give the tables the test models declare; shards listen on free ports chosen
by the kernel (--port 0) and announce them in their `listening` event.
"""

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
WORKERS = os.path.join(HERE, "workers")
EVENT_PREFIX = "@geops "


def geops_bin():
    path = os.environ.get("GEOPS_BIN", "")
    if not path or not os.path.exists(path):
        pytest.fail(f"GEOPS_BIN={path!r} is not the geops binary (CTest sets it)")
    return path


def write_topology(folder, *, layers=(4, 3, 2), shards=1, workers=1, clocks=5, staleness=0,
                   chunk_kib=16, lease_ms=10000, rpc_timeout_ms=30000, site="py", workload="counter",
                   sites=None, wan_mode="asp", storage=False):
    """workload "counter": the site's own zero-initialised MLP of `layers`;
    "client": the workers' model (layers unused). `sites`: names of two or
    more sites (instead of `site`), each with `shards` and `workers`, linked
    at 100 Mbit/s and 5 ms, replicating with `wan_mode`. `storage`: shards
    keep their state in RocksDB stores under `folder`/data (fsync per tick)."""
    path = os.path.join(folder, "topology.toml")
    names = list(sites) if sites else [site]
    site_lines = "".join(f"""[[sites]]
name = "{n}"
host = "127.0.0.1"
shards = {shards}
workers = {workers}
""" for n in names)
    storage_lines = ""
    if storage:
        storage_lines = f'[storage]\ndata_dir = {json.dumps(os.path.join(folder, "data"))}\ndurability = "sync"\n'
    wan_lines = ""
    if len(names) > 1:
        wan_lines = f"""[wan]
mode = "{wan_mode}"
staleness_ds = 2
threshold = 0.0
peer_lease_ms = {lease_ms}
""" + "".join(f"""[[links]]
src = "{a}"
dst = "{b}"
bandwidth_mbps = 100
delay_ms = 5
""" for i, a in enumerate(names) for b in names[i + 1:])
    model_lines = ('workload = "client"' if workload == "client" else
                   f'workload = "counter"\nlayers = [{", ".join(str(n) for n in layers)}]')
    with open(path, "w") as f:
        f.write(f"""name = "pytest"
[model]
{model_lines}
chunk_kib = {chunk_kib}
seed = 1
[training]
clocks = {clocks}
staleness = {staleness}
worker_lease_ms = {lease_ms}
rpc_timeout_ms = {rpc_timeout_ms}
{storage_lines}{wan_lines}{site_lines}""")
    return path


class LineReader:
    """Collects a process's stdout lines on a thread, so waits can time out."""

    def __init__(self, stream):
        self.lines = queue.Queue()
        self.all = []
        threading.Thread(target=self._run, args=(stream,), daemon=True).start()

    def _run(self, stream):
        for line in stream:
            self.all.append(line)
            self.lines.put(line)
        self.lines.put(None)

    def wait_for(self, predicate, timeout):
        """The first line satisfying predicate, or None after timeout / end of output."""
        end = time.monotonic() + timeout
        while True:
            left = end - time.monotonic()
            if left <= 0:
                return None
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                return None
            if line is None:
                return None
            if predicate(line):
                return line


def events(lines):
    """The JSON events among output lines."""
    return [json.loads(l[len(EVENT_PREFIX):]) for l in lines if l.startswith(EVENT_PREFIX)]


class Site:
    """The shard processes of one site; `addresses` (and, with a peers file,
    `mirrors`) in shard order; `readers` keep each shard's output."""

    def __init__(self, topology, site, shards, peers_file=None):
        self.topology = topology
        self.site = site
        self.procs = []
        self.readers = []
        self.addresses = []
        self.mirrors = []
        for i in range(shards):
            command = [geops_bin(), "site", "--topology", topology, "--site", site, "--shard", str(i), "--port", "0"]
            if peers_file:
                command += ["--mirror-port", "0", "--peers-file", peers_file]
            proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            self.procs.append(proc)
            reader = LineReader(proc.stdout)
            self.readers.append(reader)
            line = reader.wait_for(lambda l: l.startswith(EVENT_PREFIX) and '"listening"' in l, timeout=30)
            if line is None:
                self.stop()
                pytest.fail(f"shard {i} did not start listening: {''.join(reader.all)}")
            listening = events([line])[0]
            self.addresses.append(listening["address"])
            self.mirrors.append(listening.get("mirror"))

    def kill_shard(self, i):
        self.procs[i].kill()
        self.procs[i].wait(timeout=10)

    def restart_shard(self, i):
        """Starts shard i again on the port it had, as a supervisor would."""
        port = self.addresses[i].rsplit(":", 1)[1]
        proc = subprocess.Popen([geops_bin(), "site", "--topology", self.topology, "--site", self.site,
                                 "--shard", str(i), "--port", port],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.procs[i] = proc
        self.readers[i] = LineReader(proc.stdout)

    def stop(self):
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)


@pytest.fixture
def start_site(tmp_path):
    """start_site(**topology_settings) -> Site; every shard is stopped at the end."""
    sites = []

    def start(**settings):
        shards = settings.get("shards", 1)
        topology = write_topology(str(tmp_path), **settings)
        site = Site(topology, settings.get("site", "py"), shards)
        sites.append(site)
        return site

    yield start
    for site in sites:
        site.stop()


@pytest.fixture
def start_sites(tmp_path):
    """start_sites(names, **topology_settings) -> {name: Site}: every site of a
    multi-site topology, each shard with a mirror port; the peers file that
    tells them each other's mirrors is written once all listen, as `geops
    launch` does. Every shard is stopped at the end."""
    started = []

    def start(names, **settings):
        shards = settings.get("shards", 1)
        topology = write_topology(str(tmp_path), sites=names, **settings)
        peers_file = os.path.join(str(tmp_path), "peers.json")
        sites = {}
        for name in names:
            sites[name] = Site(topology, name, shards, peers_file=peers_file)
            started.append(sites[name])
        with open(peers_file + ".tmp", "w") as f:
            json.dump({"mirrors": {n: s.mirrors for n, s in sites.items()}}, f)
        os.rename(peers_file + ".tmp", peers_file)
        return sites

    yield start
    for site in started:
        site.stop()


def worker_env(site, worker, **extra):
    env = dict(os.environ)
    env.update({"GEOPS_SITE": site.site, "GEOPS_WORKER": str(worker), "GEOPS_SHARDS": ",".join(site.addresses),
                "GEOPS_TOPOLOGY": site.topology, "PYTHONUNBUFFERED": "1"})
    env.update({k: str(v) for k, v in extra.items()})
    return env


def start_worker(script, env):
    """A worker process running tests/python/workers/<script>."""
    return subprocess.Popen([sys.executable, os.path.join(WORKERS, script)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(proc, timeout):
    """(returncode, stdout, stderr) of a process, killed if it outlives timeout."""
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate(timeout=10)
        pytest.fail(f"worker still running after {timeout} s\nstdout:\n{out}\nstderr:\n{err}")
    return proc.returncode, out, err
