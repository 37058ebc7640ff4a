"""geops: train your own PyTorch model through a geops site.

    import geops, torch
    model = Net()
    with geops.init(model) as ps:     # settings from GEOPS_* variables or arguments
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        for step in ps.steps():
            ps.pull()
            loss = ...; opt.zero_grad(); loss.backward(); opt.step()
            ps.push()
            ps.clock()
            ps.report(loss=loss.item())

Every named parameter of the model is a float32 table of the parameter
server (geops/schema.py). Settings and the environment variables that carry
them: geops/config.py. The loop's calls: geops/session.py. Errors, one class
per geops status code: geops/errors.py.
"""

from . import errors as _errors
from .errors import (AbortedError, AlreadyExistsError, CancelledError, DataLossError, DeadlineExceededError,
                     FailedPreconditionError, GeopsError, InternalError, InvalidArgumentError, NotFoundError,
                     OutOfRangeError, PermissionDeniedError, ResourceExhaustedError, UnavailableError,
                     UnimplementedError, UnknownError)
from . import _geops
from .config import ASYNC, Config, resolve
from .schema import table_shape, tables_of
from .session import Session

# Every status code the C++ side can raise has its class.
if not set(_geops.status_code_names()) <= set(_errors._BY_CODE):
    raise ImportError("geops.errors lacks a class for a status code of the extension")


def init(model, *, site=None, worker=None, shards=None, topology=None, clocks=None, staleness=None,
         chunk_bytes=None, auth_token=None, out=None, rpc_timeout_ms=None, max_attempts=None,
         retry_backoff_ms=None, heartbeat_ms=None, retry_window_ms=None, held_id_wait_ms=None, evaluate=None):
    """Connects ``model`` to its site and returns the registered Session.

    ``evaluate(model) -> dict`` (optional) checks the site's replica at the
    end: when the ``with`` block ends normally after the whole clock budget,
    worker 0 of each site reads the final model (every worker of every site
    included) into ``model`` and calls it; ``accuracy``, ``test_loss`` and any
    other keys it returns go into the ``final`` event (and so into ``geops
    launch``'s summary, per site).

    Arguments left as None come from the GEOPS_* environment variables, then
    from the topology file, then from the defaults (geops/config.py). Raises
    InvalidArgumentError for bad settings or parameters (naming them),
    FailedPreconditionError when the model differs from the site's,
    UnavailableError when a shard cannot be reached after the retries.
    Blocks while registering; Ctrl-C raises KeyboardInterrupt.
    """
    config = resolve(site=site, worker=worker, shards=shards, topology=topology, clocks=clocks,
                     staleness=staleness, chunk_bytes=chunk_bytes, auth_token=auth_token, out=out,
                     rpc_timeout_ms=rpc_timeout_ms, max_attempts=max_attempts,
                     retry_backoff_ms=retry_backoff_ms, heartbeat_ms=heartbeat_ms,
                     retry_window_ms=retry_window_ms, held_id_wait_ms=held_id_wait_ms)
    return Session(model, config, evaluate=evaluate)


__all__ = [
    "init", "Session", "Config", "resolve", "tables_of", "table_shape", "ASYNC",
    "GeopsError", "CancelledError", "UnknownError", "InvalidArgumentError", "DeadlineExceededError",
    "NotFoundError", "AlreadyExistsError", "ResourceExhaustedError", "FailedPreconditionError",
    "AbortedError", "OutOfRangeError", "UnimplementedError", "InternalError", "UnavailableError",
    "DataLossError", "PermissionDeniedError",
]
