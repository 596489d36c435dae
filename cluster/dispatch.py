"""Dispatching work items to a pool of actors: bounded in-flight work, priorities, retries.

Each actor has at most ``max_inflight`` calls outstanding (one running, the
next queued on the actor so it never idles between calls).  Pending work is
ordered by its priority tuple (lowest first); the driver gives render work of
the longest shots the smallest priorities.  An item whose actor dies is handed
to another actor (the dead one is replaced through ``replace_actor``) up to
``max_attempts`` times; an exception raised by the work itself is returned to
the caller, not retried (it would fail the same way again).
"""

from __future__ import annotations

import heapq
import itertools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import ray
from ray.exceptions import RayActorError, RayTaskError

logger = logging.getLogger(__name__)


@dataclass(order=True)
class WorkItem:
    """One call to make on some actor: ``call(handle) -> ObjectRef``."""

    priority: tuple[Any, ...]
    seq: int = field(default=0)
    kind: str = field(default="", compare=False)
    shot: str = field(default="", compare=False)
    chunk: int = field(default=-1, compare=False)
    call: Callable[[Any], Any] = field(default=lambda h: None, compare=False, repr=False)
    attempts: int = field(default=0, compare=False)
    actor: str | None = field(default=None, compare=False)
    submitted_at: float = field(default=0.0, compare=False)


@dataclass
class Outcome:
    """A finished item: ``value`` on success, else ``error`` (the work's own exception, unwrapped)."""

    item: WorkItem
    value: Any = None
    error: BaseException | None = None
    seconds: float = 0.0


def unwrap(exc: BaseException) -> BaseException:
    """The exception raised inside the task, if Ray wrapped one."""
    if isinstance(exc, RayTaskError) and exc.cause is not None:
        return exc.cause
    return exc


class Dispatcher:
    """Keeps every actor busy with at most ``max_inflight`` calls, highest priority first."""

    def __init__(
        self,
        actors: list[tuple[str, Any]],
        *,
        max_inflight: int,
        max_attempts: int = 3,
        replace_actor: Callable[[str], tuple[str, Any]] | None = None,
    ) -> None:
        if not actors:
            raise ValueError("Dispatcher needs at least one actor")
        self.actors: dict[str, Any] = dict(actors)
        self.max_inflight = max_inflight
        self.max_attempts = max_attempts
        self.replace_actor = replace_actor
        self._pending: list[WorkItem] = []
        self._inflight: dict[Any, WorkItem] = {}  # ObjectRef -> item
        self._load: dict[str, int] = {label: 0 for label in self.actors}
        self._seq = itertools.count()
        self.retries = 0
        self.assigned: dict[str, int] = {label: 0 for label in self.actors}

    @property
    def idle(self) -> bool:
        return not self._pending and not self._inflight

    @property
    def inflight(self) -> int:
        return len(self._inflight)

    @property
    def pending(self) -> int:
        return len(self._pending)

    def load(self) -> dict[str, int]:
        """Calls outstanding per live actor (never above ``max_inflight``)."""
        return dict(self._load)

    def submit(self, item: WorkItem) -> None:
        item.seq = next(self._seq)
        heapq.heappush(self._pending, item)

    def drop(self, shot: str) -> int:
        """Forget the pending (not yet dispatched) items of ``shot``; returns how many."""
        kept = [item for item in self._pending if item.shot != shot]
        dropped = len(self._pending) - len(kept)
        heapq.heapify(kept)
        self._pending = kept
        return dropped

    def pump(self) -> None:
        """Hand pending items to the least-loaded actors with room."""
        while self._pending:
            label = min(self._load, key=lambda k: (self._load[k], k))
            if self._load[label] >= self.max_inflight:
                return
            item = heapq.heappop(self._pending)
            item.actor = label
            item.attempts += 1
            item.submitted_at = time.perf_counter()
            ref = item.call(self.actors[label])
            self._inflight[ref] = item
            self._load[label] += 1
            self.assigned[label] = self.assigned.get(label, 0) + 1

    def wait(self, timeout: float) -> list[Outcome]:
        """Outcomes of the items that finished within ``timeout`` seconds (maybe none)."""
        self.pump()
        if not self._inflight:
            return []
        ready, _ = ray.wait(list(self._inflight), num_returns=1, timeout=timeout)
        if ready:
            # Collect everything else that is already done too, without waiting.
            more, _ = ray.wait(list(self._inflight), num_returns=len(self._inflight), timeout=0)
            ready = list(dict.fromkeys([*ready, *more]))
        outcomes: list[Outcome] = []
        for ref in ready:
            item = self._inflight.pop(ref)
            assert item.actor is not None
            if item.actor in self._load:
                self._load[item.actor] -= 1
            seconds = time.perf_counter() - item.submitted_at
            try:
                outcomes.append(Outcome(item, value=ray.get(ref), seconds=seconds))
            except RayActorError as exc:
                self._actor_lost(item, exc)
                if item.attempts >= self.max_attempts:
                    outcomes.append(Outcome(item, error=exc, seconds=seconds))
                else:
                    self.retries += 1
                    logger.warning(
                        "%s of %s chunk %d lost with %s (attempt %d); retrying elsewhere",
                        item.kind,
                        item.shot,
                        item.chunk,
                        item.actor,
                        item.attempts,
                    )
                    self.submit(item)
            except Exception as exc:  # noqa: BLE001 - returned to the driver to fail the shot
                outcomes.append(Outcome(item, error=unwrap(exc), seconds=seconds))
        self.pump()
        return outcomes

    def _actor_lost(self, item: WorkItem, exc: BaseException) -> None:
        label = item.actor
        if label is None or label not in self.actors:
            return
        logger.warning("render actor %s died: %s", label, exc)
        del self.actors[label]
        del self._load[label]
        if self.replace_actor is not None:
            new_label, handle = self.replace_actor(label)
            self.actors[new_label] = handle
            self._load[new_label] = 0
            self.assigned.setdefault(new_label, 0)
        if not self.actors:
            raise RuntimeError("every render actor died and none could be replaced")
        # Work queued on the dead actor fails with RayActorError too and is retried as it arrives.
