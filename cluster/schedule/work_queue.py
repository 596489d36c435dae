"""Which pending work item goes to which actor next: the dispatcher's queue policy, without Ray.

Ray runs an actor's calls one after another in the order they were submitted,
so a call queued on a busy actor cannot be overtaken by work that becomes ready
later.  The order (``resources.dispatch_order``):

* ``render_first`` (the default): a render may wait in a busy actor's queue (up
  to the cap), so an actor never idles between renders; an analysis goes only
  to an idle actor (nothing running or queued on it).  A shot whose analysis
  and tracking finish while later shots are analysed thus waits for its renders
  at most for the calls running at that moment, never for analyses queued
  behind them; an actor with no render to take still takes analysis work.  A
  render prefers the actor that analysed its chunk when that actor is idle now
  (it may still hold the chunk's decoded frames), and is never held back for it.
* ``analysis_first``: analyses are queued on busy actors like renders (fewer
  driver round trips between analyses), so every actor's queue fills with
  analyses and a tracked shot's renders wait behind them: the first shot is
  published later.

In both orders pending renders go before pending analyses, each kind by its
priority tuple (lowest first), then by submission; among the actors a call may
go to, an affinity match (e.g. an adapter the actor has loaded) is preferred,
then the least-loaded actor, then the lowest label, so the placement depends
only on the order in which results came back.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from cluster.spec.job import DispatchOrder


@dataclass(order=True)
class WorkItem:
    """One call to make on some actor: ``call(handle) -> ObjectRef``.

    ``kind``: ``analyze`` is analysis work, anything else (``render``) queues as render work; ``actor`` is
    the actor of the latest attempt, ``actors`` every attempt's actor in order; ``affinity`` keys
    steer placement; ``prefer``: the actor to take this item when it is idle (a render's analysing
    actor); ``queued_at`` / ``submitted_at``: ``perf_counter()`` when the latest attempt was
    queued here / handed to its actor.
    """

    priority: tuple[Any, ...]
    seq: int = field(default=0)
    kind: str = field(default="", compare=False)
    shot: str = field(default="", compare=False)
    chunk: int = field(default=-1, compare=False)
    call: Callable[[Any], Any] = field(default=lambda h: None, compare=False, repr=False)
    attempts: int = field(default=0, compare=False)
    actor: str | None = field(default=None, compare=False)
    submitted_at: float = field(default=0.0, compare=False)
    queued_at: float = field(default=0.0, compare=False)
    affinity: tuple[str, ...] = field(default=(), compare=False)
    actors: list[str] = field(default_factory=list, compare=False)
    prefer: str | None = field(default=None, compare=False)


class WorkQueue:
    """Pending work items and the actors' affinity keys; :meth:`take` picks the next placement."""

    def __init__(self, order: DispatchOrder = "render_first") -> None:
        self.order = order
        self._renders: list[WorkItem] = []  # and any other kind but analysis
        self._analyses: list[WorkItem] = []
        self._affinity: dict[str, set[str]] = {}  # affinity key -> labels that ran it

    def __len__(self) -> int:
        return len(self._renders) + len(self._analyses)

    def push(self, item: WorkItem) -> None:
        heapq.heappush(self._analyses if item.kind == "analyze" else self._renders, item)

    def drop(self, shot: str) -> int:
        """Forget the pending items of ``shot``; returns how many."""
        dropped = 0
        for heap in (self._renders, self._analyses):
            kept = [item for item in heap if item.shot != shot]
            dropped += len(heap) - len(kept)
            heapq.heapify(kept)
            heap[:] = kept
        return dropped

    def take(self, load: Mapping[str, int], cap: int) -> tuple[WorkItem, str] | None:
        """The next item and the actor to hand it to, given each ready actor's calls outstanding
        (``load``) and the most one may hold (``cap``); None when nothing pending can go anywhere now.

        The item leaves the queue; the caller hands it over and then calls :meth:`placed`.
        One pass over the actors, no sorting: a placement costs microseconds at 1,024 actors.
        """
        if not self._renders and not self._analyses:
            return None
        least = min(((n, label) for label, n in load.items() if n < cap), default=None)
        if least is None:
            return None
        if self._renders:
            item = heapq.heappop(self._renders)
            return item, self._place(item, load, cap)
        if self.order == "render_first":
            if least[0] != 0:
                return None  # analyses go to idle actors only
            item = heapq.heappop(self._analyses)
            return item, self._place(item, load, 1)
        item = heapq.heappop(self._analyses)
        return item, self._place(item, load, cap)

    def room(self, load: Mapping[str, int], cap: int) -> int:
        """Calls actors with this ``load`` could still take of the pending work (whether to grow the pool)."""
        if self.order == "render_first" and not self._renders:
            return sum(1 for n in load.values() if n == 0)  # analyses go to idle actors only
        return sum(max(0, cap - n) for n in load.values())

    def placed(self, item: WorkItem, label: str) -> None:
        """``label`` took ``item``: it holds the item's affinity keys from now on."""
        for key in item.affinity:
            self._affinity.setdefault(key, set()).add(label)

    def forget(self, label: str) -> None:
        """``label`` is gone (released or lost): it holds no affinity key any more."""
        for labels in self._affinity.values():
            labels.discard(label)

    def _place(self, item: WorkItem, load: Mapping[str, int], limit: int) -> str:
        """The actor for ``item`` among those with fewer than ``limit`` calls: the one it prefers when
        idle, else the least loaded of those holding its affinity keys, else the least loaded (ties: by
        label)."""
        if self.order == "render_first" and item.prefer is not None and load.get(item.prefer, limit) == 0:
            return item.prefer
        if item.affinity:
            holders = set().union(*(self._affinity.get(k, set()) for k in item.affinity))
            preferred = [(n, label) for label, n in load.items() if n < limit and label in holders]
            if preferred:
                return min(preferred)[1]
        return min((n, label) for label, n in load.items() if n < limit)[1]
