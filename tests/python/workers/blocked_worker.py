"""Finishes clock 0, announces itself, then blocks in a pull that waits for a
slow peer (BSP, a long rpc timeout). On KeyboardInterrupt it reports how long
the interrupt took, shows the session still works (an async pull, which
never waits), and exits 130."""

import sys
import time

import geops
from models import Mlp

model = Mlp((4, 3, 2))
with geops.init(model, staleness=0, rpc_timeout_ms=120000) as ps:
    ps.pull()
    ps.push()
    ps.clock()
    print("BLOCKING", flush=True)
    try:
        ps.pull()
    except KeyboardInterrupt:
        print(f"INTERRUPTED {time.monotonic():.3f}", flush=True)
        ps.pull(staleness=geops.ASYNC)
        print("STILL USABLE", flush=True)
        ps.close(final=False)
        sys.exit(130)
    print("PULL RETURNED", flush=True)
