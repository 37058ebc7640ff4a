"""Session: one worker training a PyTorch model through its site's shards.

The model's parameters are the tables; the session moves values between the
tensors and the C++ client (worker/ps_client.h) in place:

    with geops.init(model) as ps:
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        for step in ps.steps():
            ps.pull()        # SSP-fresh values into the parameters
            loss = ...; opt.zero_grad(); loss.backward(); opt.step()
            ps.push()        # the change this step made (after - pulled)
            ps.clock()       # ship it, advance the clock
            ps.report(loss=loss.item())

Within one clock the order is pull, push, clock; push may be repeated (the
last one counts), pull after push is refused. A change to the parameters
that would be lost is refused with FailedPreconditionError naming the
parameter: a pull after a step that was not pushed (``pull(discard=True)``
drops it on purpose), a clock after a step that was not pushed or was made
after the push. Blocking calls (init, pull,
clock) answer Ctrl-C within about a second with KeyboardInterrupt and
leave the session usable. Errors are geops.GeopsError subclasses.

Not thread-safe: one thread drives a session.
"""

import os
import time

from . import _geops
from .errors import FailedPreconditionError, InvalidArgumentError
from .events import EventLog
from .schema import tables_of, views


def _exit_with_parent():
    """Asks the kernel to end this process when its parent (``geops launch``)
    dies, as the launcher's own children do (cli/exit_with_parent.cc)."""
    import ctypes
    import signal
    PR_SET_PDEATHSIG = 1
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
    except (OSError, AttributeError):
        pass  # not Linux: the launcher's SIGTERM still ends the worker


class Session:
    """Created by ``geops.init``; registered with the shards on return."""

    def __init__(self, model, config, evaluate=None):
        self.model = model
        self.config = config
        self._evaluate = evaluate
        if os.environ.get("GEOPS_EXIT_WITH_PARENT") == "1":
            _exit_with_parent()
        # Buffers (BatchNorm's running statistics) are tables of a model the
        # workers bring: the shards keep their average over every worker.
        sync_buffers = not config.topology or _geops.load_topology(config.topology)["workload"] == "client"
        self._tables = tables_of(model, buffers=sync_buffers)
        self._events = EventLog(config.site, config.worker, config.out)
        self._client = None
        self._start = time.monotonic()
        self._last_report = self._start
        self._last_clock_t = self._start
        self._examples = 0
        self._reported_examples = 0
        self._last = {}  # latest loss / accuracy / test_loss reported
        try:
            self._client = _geops.Client(
                tables=[(t.name, t.rows, t.cols) for t in self._tables], shards=config.shards,
                worker=config.worker, staleness=config.staleness, rpc_timeout_ms=config.rpc_timeout_ms,
                heartbeat_ms=config.heartbeat_ms, max_attempts=config.max_attempts,
                retry_backoff_ms=config.retry_backoff_ms, auth_token=config.auth_token,
                chunk_bytes=config.chunk_bytes, topology=config.topology,
                retry_window_ms=config.retry_window_ms, site=config.site, held_id_wait_ms=config.held_id_wait_ms,
                takeover=os.environ.get("GEOPS_TAKEOVER") == "1",
                buffers=[t.buffer for t in self._tables], buffer_scale=1.0 / max(1, config.world_size))
            self._client.start(views(self._tables))
            self._step = self.current_clock
            # The model starts from the site's values (a resumed worker from where it left off).
            self._client.pull(views(self._tables))
        except BaseException:
            self._close_quietly()
            raise
        self._emit("worker_started", clock=self.current_clock)

    # ----- the training loop -------------------------------------------------

    @property
    def current_clock(self):
        """How many clocks this worker has finished (the clock of the next step)."""
        return self._live().current_clock

    @property
    def clocks(self):
        """The clock budget, or None for none."""
        return self.config.clocks

    @property
    def tables(self):
        """(name, rows, cols) of every table, in parameter order."""
        return self._live().tables

    def steps(self):
        """Yields the clock of each remaining step up to the budget (from where a
        resumed worker left off). Each step must call ``clock()`` once."""
        while self.clocks is None or self.current_clock < self.clocks:
            step = self.current_clock
            self._step = step
            yield step
            if self.current_clock == step:
                raise FailedPreconditionError(f"step {step} ended without ps.clock(); call it once per step")

    def pull(self, staleness=None, discard=False):
        """Brings values fresh enough for this clock into the parameters, in place.

        By default per the SSP bound (from the cache when it allows); with
        ``staleness=k``, reads from the shards values that include every update
        through clock - k - 1 (``staleness=0`` waits for every worker of the site).
        Blocks until the shards allow the read or the rpc timeout passes
        (DeadlineExceededError naming the workers holding it back).

        Refused with FailedPreconditionError, nothing read, when a parameter
        changed since the last pull (or push) and the change was not pushed:
        the pull would overwrite it. ``discard=True`` drops such a change.
        """
        self._step = self.current_clock
        self._live().pull(views(self._tables), staleness, discard)

    def push(self):
        """Stages this step's change of every parameter (its value now minus the
        value pulled) to be shipped at ``clock()``. Refused, nothing staged, with
        InvalidArgumentError naming the parameter when a value is NaN or Inf."""
        self._live().push(views(self._tables))

    def clock(self):
        """Ships the staged deltas to the shards and advances the clock (the last
        clock of the budget tells the shards this worker is finished). On error
        nothing changes and ``clock()`` may be called again. Refused with
        FailedPreconditionError, nothing sent, when a parameter changed after
        ``push()`` (push again) or, with no push in this clock, since the pull
        (push first)."""
        finished = self.clocks is not None and self.current_clock + 1 >= self.clocks
        self._live().clock(finished, views(self._tables))
        self._last_clock_t = time.monotonic()

    def report(self, loss=None, accuracy=None, test_loss=None, examples=None, **extra):
        """Emits a ``progress`` event for the current step (``loss``; ``examples``
        trained since the last report gives examples_per_sec) and, with
        ``accuracy`` or ``test_loss``, an ``eval`` event, taken to be of the
        model the last ``clock()`` left (the launcher's time to target counts
        from that clock, not from the end of the evaluation). ``extra`` fields go
        into the progress event as they are."""
        now = time.monotonic()
        if examples:
            self._examples += examples
        if loss is not None:
            self._last["final_loss"] = float(loss)
        rate = 0.0
        fresh = self._examples - self._reported_examples
        if fresh and now > self._last_report:
            rate = fresh / (now - self._last_report)
        self._reported_examples = self._examples
        self._last_report = now
        self._emit("progress", clock=self._step, clocks=self.clocks, loss=None if loss is None else float(loss),
                   examples_per_sec=rate, t=now - self._start, **extra)
        if accuracy is not None or test_loss is not None:
            if accuracy is not None:
                self._last["test_accuracy"] = float(accuracy)
            if test_loss is not None:
                self._last["test_loss"] = float(test_loss)
            # The model evaluated is the one the last clock left: its age
            # keeps the evaluation's own time out of time_to_target.
            self._emit("eval", clock=self._step, test_accuracy=None if accuracy is None else float(accuracy),
                       test_loss=None if test_loss is None else float(test_loss), t=now - self._start,
                       model_age_seconds=max(0.0, now - self._last_clock_t))

    def save(self, path, format=None, staleness=0):
        """Writes the site's replica as a PyTorch state_dict file, atomically.

        The replica is read from the shards into copies (the model's own
        tensors are not touched): every parameter and synchronised buffer at
        this worker's clock, with every update of the site's workers through
        clock - ``staleness`` - 1 (``staleness=0``: waits for every worker of
        the site to reach this clock) and what has arrived from the other
        sites. Entries of ``model.state_dict()`` that are not tables
        (integer buffers) are this worker's own. ``format``: "torch"
        (``torch.save``; ``torch.load`` and ``model.load_state_dict`` read it)
        or "safetensors" (needs the safetensors package); by default from
        the file name (".safetensors", else torch). Returns ``path``.
        Refused between push() and clock()."""
        import torch
        fmt = format or ("safetensors" if str(path).endswith(".safetensors") else "torch")
        if fmt not in ("torch", "safetensors"):
            raise InvalidArgumentError(f"save format {fmt!r}: use 'torch' or 'safetensors'")
        if fmt == "safetensors":
            try:
                from safetensors.torch import save_file
            except ImportError:
                raise FailedPreconditionError("saving as safetensors needs the safetensors package "
                                              "(pip install safetensors), or save as torch (.pt)") from None
        copies = [torch.empty_like(t.param, memory_format=torch.contiguous_format) for t in self._tables]
        self._live().snapshot([c.numpy() for c in copies], staleness)
        by_name = {t.name: c for t, c in zip(self._tables, copies)}
        state = {name: by_name[name] if name in by_name else tensor.detach().clone()
                 for name, tensor in self.model.state_dict().items()}
        tmp = f"{path}.tmp-{os.getpid()}"
        if fmt == "safetensors":
            save_file(state, tmp, metadata={"geops_clock": str(self.current_clock)})
        else:
            torch.save(state, tmp)
        os.replace(tmp, path)
        return path

    def stats(self):
        """The client's counters: bytes, refreshes, cache hits, retries, waits."""
        return self._live().stats()

    # ----- lifetime ----------------------------------------------------------

    def close(self, final=True):
        """Emits the ``final`` event (unless ``final`` is False), stops heartbeats
        and closes the connections. Idempotent."""
        if self._client is None:
            return
        try:
            if final:
                self._check_replica()
                self._emit_final()
        finally:
            self._close_quietly()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        self.close(final=exc_type is None)
        return False

    def _check_replica(self):
        """Worker 0 of a site, at a clean end of the clock budget, reads the
        site's final model (staleness 0 after every worker finished: the read
        waits for every worker of the site and, with a WAN, for every peer
        site's final updates) into the parameters and runs ``evaluate`` on it.
        Its result goes into an ``eval`` event (final: true) and the ``final``
        event: ``accuracy`` as test_accuracy, ``test_loss``, and any other key
        as it is (e.g. counter_max_abs_error)."""
        if self._evaluate is None or self.config.worker != 0:
            return
        if self.clocks is None or self.current_clock < self.clocks:
            return
        # The read waits for every site's drain: say so, or the launcher's
        # progress would sit at the last clock without a word.
        self._emit("final_read", clock=self.current_clock, t=time.monotonic() - self._start)
        self._client.pull(views(self._tables), 0, True)  # the budget is spent: nothing more to push
        taken = time.monotonic()
        result = dict(self._evaluate(self.model) or {})
        accuracy = result.pop("accuracy", None)
        test_loss = result.pop("test_loss", None)
        now = time.monotonic()
        if accuracy is not None:
            self._last["test_accuracy"] = float(accuracy)
        if test_loss is not None:
            self._last["test_loss"] = float(test_loss)
        self._last["extra_final"] = result
        self._emit("eval", clock=self.current_clock, final=True,
                   test_accuracy=None if accuracy is None else float(accuracy),
                   test_loss=None if test_loss is None else float(test_loss), t=now - self._start,
                   model_age_seconds=now - taken, **result)

    def _live(self):
        if self._client is None:
            raise FailedPreconditionError("the geops session is closed")
        return self._client

    def _emit(self, event, **fields):
        self._events.emit({"event": event, "site": self.config.site, "worker": self.config.worker, **fields})

    def _emit_final(self):
        s = self._client.stats()
        fields = {"counter_expected": None, "counter_max_abs_error": None}
        fields.update(self._last.get("extra_final", {}))
        self._emit("final", clocks=self.current_clock, wall_seconds=time.monotonic() - self._start,
                   final_loss=self._last.get("final_loss"), test_accuracy=self._last.get("test_accuracy"),
                   test_loss=self._last.get("test_loss"), lan_bytes_sent=s["bytes_sent"],
                   lan_bytes_received=s["bytes_received"], max_staleness_observed=s["max_staleness"],
                   examples=self._examples, **fields,
                   read_wait_seconds=s["read_wait_seconds"], flush_seconds=s["flush_seconds"],
                   refreshes=s["refreshes"], cache_hits=s["cache_hits"], retries=s["retries"],
                   cpu_seconds=time.process_time())

    def _close_quietly(self):
        client, self._client = self._client, None
        if client is not None:
            client.close()
        self._events.close()
