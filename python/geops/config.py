"""Where a worker's settings come from, in order of precedence:

1. keyword arguments to ``geops.init`` (``None`` means "not given");
2. environment variables, set by ``geops launch`` for every worker it starts
   (as torchrun sets RANK and WORLD_SIZE):

   GEOPS_SITE            site name                        site
   GEOPS_WORKER          worker index within the site     worker
   GEOPS_SHARDS          host:port of each shard, comma separated, in shard order
   GEOPS_TOPOLOGY        topology TOML file
   GEOPS_CLOCKS          clock budget (training iterations)
   GEOPS_STALENESS       SSP bound s (0 = BSP, -1 = async)
   GEOPS_CHUNK_BYTES     chunk size in bytes
   GEOPS_AUTH_TOKEN      token presented to the shards
   GEOPS_OUT             results folder (metrics/<site>-worker-<i>.jsonl)
   GEOPS_RPC_TIMEOUT_MS  deadline of one call, server-side waits included
   GEOPS_RETRY_WINDOW_MS how long to keep retrying a shard that is down

3. the topology file, read by the same parser as ``geops site``;
4. the defaults of the C++ client (common/options.h, common/model_spec.h).

torchrun's RANK, LOCAL_RANK and WORLD_SIZE are honoured where GEOPS_WORKER
(and GEOPS_SITE) are absent, so a script started by torchrun gets distinct
worker ids: the worker is LOCAL_RANK (else RANK) within the site; with a
topology of several sites and no site named, RANK over every worker of
every site (sites in topology order) picks the site and the worker. Where
both are set they must agree: RANK is this worker's index either over the
site or over every site, WORLD_SIZE the matching count, LOCAL_RANK the
worker's index in the site; any other combination is InvalidArgumentError
naming both values.

From the topology the config also learns where this worker stands, for
splitting data between workers (torchrun's RANK and WORLD_SIZE):
``site_index`` and ``num_sites``, ``workers`` (of this site), ``rank`` (this
worker's index over every worker of every site, sites in topology order)
and ``world_size``. Without a topology: one site, workers 0..worker.

``resolve`` returns a plain ``Config``; it does no I/O besides reading the
topology file.
"""

import math
import os
from dataclasses import dataclass, field

from . import _geops
from .errors import InvalidArgumentError

DEFAULT_CHUNK_BYTES = 16 * 1024  # kDefaultChunkBytes
ASYNC = -1                       # staleness: read fresh values every clock, never wait


@dataclass
class Config:
    site: str = "site"
    worker: int = 0
    shards: list = field(default_factory=list)
    topology: str = ""               # "" when none
    clocks: int = None               # None: no budget (ps.steps() then runs until break)
    staleness: int = 0
    chunk_bytes: int = DEFAULT_CHUNK_BYTES
    auth_token: str = ""
    out: str = ""                    # "" writes no metrics file
    rpc_timeout_ms: int = 30000
    heartbeat_ms: int = 1000
    retry_window_ms: int = 300000    # keep retrying a shard that is down this long (a supervisor restarts it)
    max_attempts: int = 0            # also give up after this many tries; 0: only the window
    retry_backoff_ms: int = 20       # first back-off, doubled per retry up to 0.5 s
    held_id_wait_ms: int = 20000     # a worker id another live process holds: ask again this long, then fail
    # Where this worker stands (from the topology; not settings).
    site_index: int = 0
    num_sites: int = 1
    workers: int = 1
    rank: int = 0
    world_size: int = 1
    # The topology's [training] schedule, which the WAN threshold follows
    # (threshold_follows_lr); None without a topology. Use them in the
    # script so that the two agree: lr_at(clock) is the same half-cosine
    # decay geops' own trainer and threshold use.
    learning_rate: float = None
    final_learning_rate: float = None  # None: a constant rate
    batch_size: int = None

    def lr_at(self, clock):
        """The topology's learning rate at ``clock``: learning_rate, decayed on a
        half cosine to final_learning_rate at the last clock (common/decay.h)."""
        if self.learning_rate is None:
            raise InvalidArgumentError("no topology: the learning-rate schedule is the script's own")
        if self.final_learning_rate is None or self.clocks is None or self.clocks <= 1:
            return self.learning_rate
        progress = min(max(clock, 0), self.clocks - 1) / (self.clocks - 1)
        return self.final_learning_rate + 0.5 * (self.learning_rate - self.final_learning_rate) * (
            1.0 + math.cos(math.pi * progress))


_ENV = {
    "site": ("GEOPS_SITE", str),
    "worker": ("GEOPS_WORKER", int),
    "shards": ("GEOPS_SHARDS", str),
    "topology": ("GEOPS_TOPOLOGY", str),
    "clocks": ("GEOPS_CLOCKS", int),
    "staleness": ("GEOPS_STALENESS", int),
    "chunk_bytes": ("GEOPS_CHUNK_BYTES", int),
    "auth_token": ("GEOPS_AUTH_TOKEN", str),
    "out": ("GEOPS_OUT", str),
    "rpc_timeout_ms": ("GEOPS_RPC_TIMEOUT_MS", int),
    "retry_window_ms": ("GEOPS_RETRY_WINDOW_MS", int),
}


def _from_env(key, environ):
    name, kind = _ENV[key]
    text = environ.get(name)
    if text is None or text == "":
        return None
    if kind is int:
        try:
            return int(text)
        except ValueError:
            raise InvalidArgumentError(f"{name}={text!r} is not an integer") from None
    return text


_TORCHRUN = ("RANK", "LOCAL_RANK", "WORLD_SIZE")


def _torchrun(environ):
    """{name: int} of the torchrun variables that are set."""
    found = {}
    for name in _TORCHRUN:
        text = environ.get(name)
        if text is None or text == "":
            continue
        try:
            found[name] = int(text)
        except ValueError:
            raise InvalidArgumentError(f"{name}={text!r} (torchrun) is not an integer") from None
        if found[name] < 0:
            raise InvalidArgumentError(f"{name}={text!r} (torchrun) is negative")
    return found


def _worker_from_torchrun(torch):
    """The worker index within its site that torchrun's variables give."""
    return torch["LOCAL_RANK"] if "LOCAL_RANK" in torch else torch["RANK"]


def _check_torchrun(cfg, torch, explicit):
    """InvalidArgumentError when torchrun's variables contradict the worker's
    place (`explicit`: the settings that came from GEOPS_* or arguments)."""
    if not torch:
        return
    origin = ", ".join(f"{k}={v}" for k, v in torch.items())
    where = (f"worker {cfg.worker} of site {cfg.site} (rank {cfg.rank} of {cfg.world_size} over every site, "
             f"{cfg.worker} of {cfg.workers} in the site)")
    source = f" ({explicit})" if explicit else ""
    if "LOCAL_RANK" in torch and torch["LOCAL_RANK"] != cfg.worker:
        raise InvalidArgumentError(f"torchrun's LOCAL_RANK={torch['LOCAL_RANK']} contradicts {where}{source}; "
                                   "unset one of them or make them agree")
    pairs = [(cfg.worker, cfg.workers), (cfg.rank, cfg.world_size)]
    if "RANK" in torch and "WORLD_SIZE" in torch:
        ok = (torch["RANK"], torch["WORLD_SIZE"]) in pairs
    elif "RANK" in torch:
        ok = torch["RANK"] in (cfg.worker, cfg.rank)
    elif "WORLD_SIZE" in torch:
        ok = torch["WORLD_SIZE"] in (cfg.workers, cfg.world_size)
    else:
        ok = True
    if not ok:
        raise InvalidArgumentError(f"torchrun's {origin} contradicts {where}{source}; "
                                   "unset one of them or make them agree")


def _place_by_global_rank(cfg, topo, torch):
    """Site and worker from torchrun's RANK over every worker of every site."""
    total = sum(s["workers"] for s in topo["sites"])
    if "WORLD_SIZE" in torch and torch["WORLD_SIZE"] != total:
        raise InvalidArgumentError(
            f"torchrun's WORLD_SIZE={torch['WORLD_SIZE']} is not the {total} workers of topology {cfg.topology}, "
            "so RANK does not say which site this worker is in; set GEOPS_SITE")
    rank = torch["RANK"]
    for s in topo["sites"]:
        if rank < s["workers"]:
            return s["name"], rank
        rank -= s["workers"]
    raise InvalidArgumentError(f"torchrun's RANK={torch['RANK']} is outside the {total} workers of topology "
                               f"{cfg.topology}")


def _shard_list(value):
    if isinstance(value, str):
        value = [s.strip() for s in value.split(",") if s.strip()]
    return list(value)


def _apply_topology(cfg, given, torch):
    topo = _geops.load_topology(cfg.topology)
    for key in ("clocks", "staleness", "chunk_bytes", "auth_token", "rpc_timeout_ms",
                "heartbeat_ms", "max_attempts", "retry_backoff_ms", "retry_window_ms"):
        if key not in given:
            setattr(cfg, key, topo[key])
    sites = {s["name"]: s for s in topo["sites"]}
    if "site" not in given:
        if len(sites) == 1:
            cfg.site = topo["sites"][0]["name"]
        elif "worker" not in given and "RANK" in torch and "LOCAL_RANK" not in torch:
            cfg.site, cfg.worker = _place_by_global_rank(cfg, topo, torch)
        elif "worker" not in given and "RANK" in torch and "WORLD_SIZE" in torch:
            cfg.site, _ = _place_by_global_rank(cfg, topo, torch)
        else:
            raise InvalidArgumentError(
                f"topology {cfg.topology} has sites {sorted(sites)}; set GEOPS_SITE or pass site=")
    site = sites.get(cfg.site)
    if site is None:
        raise InvalidArgumentError(f"topology {cfg.topology} has no site {cfg.site!r}; sites: {sorted(sites)}")
    if not 0 <= cfg.worker < site["workers"]:
        raise InvalidArgumentError(
            f"worker {cfg.worker} outside 0..{site['workers'] - 1} of site {cfg.site}")
    names = [s["name"] for s in topo["sites"]]
    cfg.site_index = names.index(cfg.site)
    cfg.num_sites = len(names)
    cfg.workers = site["workers"]
    cfg.rank = sum(s["workers"] for s in topo["sites"][:cfg.site_index]) + cfg.worker
    cfg.world_size = sum(s["workers"] for s in topo["sites"])
    cfg.learning_rate = topo["learning_rate"]
    cfg.final_learning_rate = topo["final_learning_rate"] if topo["final_learning_rate"] >= 0 else None
    cfg.batch_size = topo["batch_size"]
    if "shards" not in given:
        if site["base_port"] == 0:
            raise InvalidArgumentError(
                f"site {cfg.site} has no base_port in {cfg.topology}; set GEOPS_SHARDS or pass shards=")
        cfg.shards = [f"{site['host']}:{site['base_port'] + i}" for i in range(site["shards"])]
    if len(cfg.shards) != site["shards"]:
        raise InvalidArgumentError(
            f"{len(cfg.shards)} shard addresses given; site {cfg.site} has {site['shards']} shards")


_DERIVED = {"site_index", "num_sites", "workers", "rank", "world_size", "learning_rate", "final_learning_rate",
            "batch_size"}


def resolve(environ=None, **kwargs):
    """The Config for ``geops.init(**kwargs)`` under ``environ`` (default os.environ)."""
    environ = os.environ if environ is None else environ
    unknown = set(kwargs) - (set(Config.__dataclass_fields__) - _DERIVED)
    if unknown:
        raise TypeError(f"geops.init() got unknown settings {sorted(unknown)}")
    given = {k: v for k, v in kwargs.items() if v is not None}
    explicit = [f"{k}={given[k]!r} given" for k in ("site", "worker") if k in given]
    for key in _ENV:
        if key not in given:
            value = _from_env(key, environ)
            if value is not None:
                given[key] = value
                if key in ("site", "worker"):
                    explicit.append(f"{_ENV[key][0]}={value}")
    if "shards" in given:
        given["shards"] = _shard_list(given["shards"])
    torch = _torchrun(environ)
    cfg = Config(**given)
    if "worker" not in given and ("RANK" in torch or "LOCAL_RANK" in torch):
        cfg.worker = _worker_from_torchrun(torch)
    if cfg.topology:
        _apply_topology(cfg, given, torch)
        _check_torchrun(cfg, torch, ", ".join(explicit))
    else:
        # One site of unknown size: only LOCAL_RANK can be checked.
        cfg.rank = cfg.worker
        cfg.workers = cfg.world_size = cfg.worker + 1
        _check_torchrun(cfg, {k: v for k, v in torch.items() if k == "LOCAL_RANK"}, ", ".join(explicit))
    if not cfg.shards:
        raise InvalidArgumentError("no shard addresses: set GEOPS_SHARDS or GEOPS_TOPOLOGY, or pass shards=")
    if cfg.clocks is not None and cfg.clocks < 0:
        raise InvalidArgumentError(f"clocks must be >= 0, got {cfg.clocks}")
    return cfg
