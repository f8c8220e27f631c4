"""The first module the warm processes' fork server imports (`deployments.warm.WarmPool`'s preload): its
import leaves Ctrl-C to the pool.

The fork server shares the process group of `watch`, which a terminal's Ctrl-C (and `slotrelay up`'s stop)
signals as a whole. multiprocessing's fork server ignores SIGINT only once it has imported its preload
modules (Prefect's flow engine and the served flow: seconds on a loaded machine); a SIGINT before that
ended it with a `KeyboardInterrupt` traceback on the console of a clean Ctrl-C. The pool stops it as it
stops the warm processes, which fork with this handler and set it again (`warm_child.wait_and_run`).
Imported by nothing else: elsewhere a SIGINT must still interrupt.
"""

from __future__ import annotations

import signal

from deployments.warm_child import left_to_the_pool

signal.signal(signal.SIGINT, left_to_the_pool)
