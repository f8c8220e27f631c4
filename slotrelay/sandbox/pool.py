"""A pool of sandboxes made ready ahead of time, one queue per container shape.

Creating and starting a container costs 100 ms to seconds (runc, and the vfs storage driver
copies the whole image), so it never sits on the request path: `acquire` hands out a sandbox
made earlier (for docker: started, its runner blocked reading its program from stdin) and a
background worker makes its replacement and removes used ones. A sandbox is handed out once
and never returns to the pool; a used one is only ever removed. When a shape has nothing ready,
`acquire` makes one inline (a "cold" hand-out) and the worker warms that shape for next time.
Shapes not asked for recently are evicted so the pool stays small.

Idle sandboxes hold memory they may grow into, so the pool has a budget: the sum of the `cost`
(for docker, the memory cap in MB) of every ready sandbox stays within `budget`. To make room for
the shape just asked for, the worker removes idle sandboxes of the least recently used other
shapes; it never refills past the budget. A cold hand-out is not held back by it: a request is
always served.

Key contracts: `acquire` never returns the same sandbox twice; `close` removes every sandbox the
pool still holds, and waits for pending removals. One condition guards the pool's state and is
notified at each change of it (a task queued, a sandbox made ready, the worker done with a task), so
the worker sleeps on it for work and a caller waits on it for a state (`wait_ready`, `wait_idle`)
instead of polling.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict, deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Generic, Literal, TypeVar

log = logging.getLogger(__name__)

Shape = TypeVar("Shape", bound=Hashable)
Item = TypeVar("Item")


@dataclass
class PoolStats:
    """Counters a test or benchmark can read: how many were created, handed out warm or cold."""

    created: int = 0
    warm: int = 0
    cold: int = 0
    removed: int = 0
    handed_out: list[str] = field(default_factory=list)


class ContainerPool(Generic[Shape, Item]):
    """Pre-created sandboxes per shape, refilled and cleaned by one background worker.

    Parameters:
        create: makes one ready sandbox of a shape, no program in it yet (called on the worker,
            or inline on a cold hand-out).
        remove: destroys a sandbox, used or not.
        ident: a sandbox's identity, for the never-twice check and the stats.
        cost: what an idle sandbox of a shape holds against the budget (for docker, its memory cap in MB).
        budget: the most the ready sandboxes of all shapes may hold at once, in `cost` units.
        size: sandboxes kept ready per shape.
        max_shapes: shapes kept warm; the least recently used beyond that are emptied.
    """

    def __init__(
        self,
        *,
        create: Callable[[Shape], Item],
        remove: Callable[[Item], None],
        ident: Callable[[Item], str],
        cost: Callable[[Shape], int],
        budget: int,
        size: int = 2,
        max_shapes: int = 4,
    ) -> None:
        self._create = create
        self._remove = remove
        self._ident = ident
        self._cost = cost
        self._budget = budget
        self._size = size
        self._max_shapes = max_shapes
        self._ready: OrderedDict[Shape, deque[Item]] = OrderedDict()
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._tasks: deque[tuple[Literal["fill"], Shape] | tuple[Literal["remove"], Item]] = deque()
        self._working = False
        self._seen: set[str] = set()
        self._closed = False
        self.stats = PoolStats()
        self._worker = threading.Thread(target=self._work, name="sandbox-pool", daemon=True)
        self._worker.start()

    def warm(self, shape: Shape) -> None:
        """Ask the worker to fill `shape` up to the pool size."""
        with self._lock:
            self._touch(shape)
            self._queue(("fill", shape))

    def acquire(self, shape: Shape) -> Item:
        """Hand out a sandbox of `shape` no program ran in; it is the caller's to use and `release`.

        Raises:
            Whatever `create` raises when nothing is ready and the inline creation fails.
        """
        with self._lock:
            ready = self._touch(shape)
            item = ready.popleft() if ready else None
        if item is None:
            item = self._create(shape)
            with self._lock:
                self.stats.created += 1
                self.stats.cold += 1
        else:
            with self._lock:
                self.stats.warm += 1
        name = self._ident(item)
        with self._lock:
            if name in self._seen:
                raise RuntimeError(f"sandbox pool handed out {name} twice")
            self._seen.add(name)
            self.stats.handed_out.append(name)
            self._queue(("fill", shape))
        return item

    def release(self, item: Item) -> None:
        """Give back a used sandbox: it is removed in the background, never reused."""
        with self._lock:
            self._queue(("remove", item))

    def ready(self, shape: Shape) -> list[Item]:
        """The sandboxes of `shape` ready now (a snapshot, for inspection: `acquire` hands them out)."""
        with self._lock:
            return list(self._ready.get(shape, ()))

    def held(self) -> int:
        """What the ready sandboxes of all shapes hold against the budget now."""
        with self._lock:
            return self._held()

    def wait_ready(self, shape: Shape, count: int, timeout: float) -> list[Item]:
        """Wait until `count` sandboxes of `shape` are ready, and return them (a snapshot, as `ready`).

        Raises:
            RuntimeError: the worker has nothing left to do and fewer are ready: no more will come
                unless the shape is asked for again (the pool keeps fewer of a shape, the budget has
                no room for them, or a creation failed: its warning is in the log).
            TimeoutError: the worker was still at work after `timeout` seconds.
        """
        with self._changed:
            self._changed.wait_for(
                lambda: len(self._ready.get(shape, ())) >= count or self._idle(), timeout
            )
            ready = list(self._ready.get(shape, ()))
            if len(ready) >= count:
                return ready
            if self._idle():
                raise RuntimeError(
                    f"the sandbox pool is idle with {len(ready)} of {count} ready for {shape}: it keeps "
                    f"{self._size} a shape within a budget of {self._budget} ({self._held()} held)"
                )
            raise TimeoutError(
                f"the sandbox pool's worker was still at work after {timeout} s, {len(ready)} of {count} "
                f"ready for {shape} ({len(self._tasks)} tasks queued)"
            )

    def wait_idle(self, timeout: float) -> None:
        """Wait until the worker has done every task queued so far (fills and removals).

        Raises:
            TimeoutError: it was still at work after `timeout` seconds.
        """
        with self._changed:
            if not self._changed.wait_for(self._idle, timeout):
                raise TimeoutError(
                    f"the sandbox pool's worker was still at work after {timeout} s "
                    f"({len(self._tasks)} tasks queued)"
                )

    def close(self) -> None:
        """Stop the worker, then remove every ready sandbox and every pending removal."""
        with self._changed:
            if self._closed:
                return
            self._closed = True
            self._changed.notify_all()
        self._worker.join(timeout=120)
        with self._lock:
            leftovers = [item for ready in self._ready.values() for item in ready]
            self._ready.clear()
        for item in leftovers:
            self._safe_remove(item)

    def _queue(self, task: tuple[Literal["fill"], Shape] | tuple[Literal["remove"], Item]) -> None:
        self._tasks.append(task)
        self._changed.notify_all()

    def _idle(self) -> bool:
        return not self._tasks and not self._working

    def _touch(self, shape: Shape) -> deque[Item]:
        ready = self._ready.get(shape)
        if ready is None:
            ready = self._ready[shape] = deque()
        self._ready.move_to_end(shape)
        while len(self._ready) > self._max_shapes:
            _, evicted = self._ready.popitem(last=False)
            for item in evicted:
                self._queue(("remove", item))
        return ready

    def _held(self) -> int:
        return sum(self._cost(shape) * len(ready) for shape, ready in self._ready.items())

    def _safe_remove(self, item: Item) -> None:
        try:
            self._remove(item)
        except Exception:  # a removal that fails must not stop the worker; the GC retries by label
            log.warning("could not remove sandbox %s", self._ident(item), exc_info=True)
            return
        with self._lock:
            self.stats.removed += 1

    def _make_room(self, shape: Shape) -> list[Item] | None:
        """Take idle sandboxes of the least recently used other shapes until one more of `shape` fits.

        Returns:
            The sandboxes taken (for the caller to remove), or None when one more of `shape` would not
            fit the budget even with every other shape emptied.
        """
        cost = self._cost(shape)
        if cost * (len(self._ready[shape]) + 1) > self._budget:
            return None
        freed: list[Item] = []
        # Oldest first: `_touch` moves each shape asked for to the end.
        for other, ready in self._ready.items():
            while ready and other != shape and self._held() + cost > self._budget:
                freed.append(ready.popleft())
        return freed

    def _fill(self, shape: Shape) -> None:
        while not self._closed:
            with self._lock:
                ready = self._ready.get(shape)
                if ready is None or len(ready) >= self._size:
                    return
                freed = self._make_room(shape)
            for item in freed or ():
                self._safe_remove(item)
            if freed is None:
                return
            try:
                item = self._create(shape)
            except Exception:  # the next acquire creates inline and reports the real error
                log.warning("could not pre-create a sandbox", exc_info=True)
                return
            with self._changed:
                self.stats.created += 1
                target = self._ready.get(shape)
                if target is not None and not self._closed:
                    target.append(item)
                    self._changed.notify_all()
                    continue
            self._safe_remove(item)
            return

    def _work(self) -> None:
        while True:
            with self._changed:
                self._working = False
                self._changed.notify_all()
                self._changed.wait_for(lambda: self._tasks or self._closed)
                if self._closed:
                    # Removals queued before close still happen; fills are moot.
                    self._tasks = deque(task for task in self._tasks if task[0] == "remove")
                if not self._tasks:
                    return
                task = self._tasks.popleft()
                self._working = True
            if task[0] == "remove":
                self._safe_remove(task[1])
            else:
                self._fill(task[1])
