"""Dispatching work items to an elastic pool of actors: bounded in-flight work, priorities, retries.

Each actor has at most ``max_inflight`` calls outstanding (one running, the
next queued on the actor so it never idles between calls).  Which pending item
goes to which actor is :mod:`cluster.schedule.work_queue`'s policy: renders before
analyses, each by its priority tuple (lowest first; the driver gives the longest
shots the smallest); with ``render_first`` analyses go to idle actors only.  An
item whose actor dies is handed to another actor (the dead one is replaced
through ``replace_actor``) up to ``max_attempts`` times; an exception raised by
the work itself is returned to the caller, not retried (it would fail the same
way again).

Elasticity (all optional):

* actors given with a *ready* ObjectRef (``starting``), or started later, take
  no work until that ref resolves (their set-up is done); one the cluster
  cannot place yet is the demand an autoscaler acts on, and joins when it can;
* with an :class:`Elasticity` policy the dispatcher starts actors up to
  ``max_actors`` while work is pending, and releases (``ray.kill``) idle and
  still-starting actors once no pending work is left for them, after
  ``idle_release_seconds`` (the grace covers the moment between one stage's
  last result and the next stage's work being submitted);
* items may name ``affinity`` keys (e.g. the identities whose adapter a render
  needs): among the actors with room, one that already ran a key of the item
  is preferred, else the least-loaded one (``prefer``, an idle analysing actor, first).
"""

from __future__ import annotations

import itertools
import logging
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import ray
from ray.exceptions import RayActorError, RayTaskError

from actors.results import ActorInfo
from cluster.schedule.work_queue import WorkItem, WorkQueue
from cluster.spec.job import DispatchOrder
from pipeline.errors import RecastError

__all__ = ["Dispatcher", "Elasticity", "Outcome", "Room", "WorkItem", "unwrap"]

logger = logging.getLogger(__name__)


@dataclass
class Outcome:
    """A finished item: ``value`` on success, else ``error`` (the work's own exception, unwrapped)."""

    item: WorkItem
    value: Any = None
    error: BaseException | None = None
    seconds: float = 0.0


@dataclass(frozen=True)
class Elasticity:
    """How the pool grows and shrinks.

    ``start_actor()`` creates one more actor (it may stay pending until the
    cluster has room); ``ready_call(handle)`` returns an ObjectRef that
    resolves once that actor's set-up is done (its value is kept in
    :attr:`Dispatcher.infos`); ``release_actor(label, handle)`` ends an idle
    actor (default ``ray.kill``).
    """

    start_actor: Callable[[], tuple[str, Any]]
    ready_call: Callable[[Any], Any]
    max_actors: int
    idle_release_seconds: float = 5.0
    release_actor: Callable[[str, Any], None] | None = None
    upcoming: Callable[[], int] | None = None
    """Work items the caller will still submit (renders of shots still in analysis): while it is
    positive no actor is released (it would only pay its set-up again a moment later)."""
    room: Callable[[int], Room] | None = None
    """The cluster's room for more actors, given how many are ready (:class:`Room`), asked at most every
    ``poll_seconds``; None: every actor up to ``max_actors`` is asked for at once (pending ones wait)."""
    draining: Callable[[], Mapping[str, float]] | None = None
    """Nodes being drained (a reclaim notice): node id -> deadline, epoch seconds (0: none)."""
    poll_seconds: float = 2.0


@dataclass(frozen=True)
class Room:
    """How many more actors the cluster can place now, and how many more may wait unplaced as the demand
    an autoscaler acts on (0 on a cluster that cannot grow)."""

    fits: int
    may_wait: int


def unwrap(exc: BaseException) -> BaseException:
    """The exception raised inside the task, if Ray wrapped one."""
    if isinstance(exc, RayTaskError) and exc.cause is not None:
        return exc.cause
    return exc


class Dispatcher:
    """Keeps every ready actor busy with at most ``max_inflight`` calls, highest priority first."""

    def __init__(
        self,
        actors: list[tuple[str, Any]],
        *,
        max_inflight: int,
        max_attempts: int = 3,
        replace_actor: Callable[[str], tuple[str, Any]] | None = None,
        on_retry: Callable[[WorkItem], None] | None = None,
        starting: Mapping[str, Any] | None = None,
        elastic: Elasticity | None = None,
        order: DispatchOrder = "render_first",
        infos: Mapping[str, ActorInfo] | None = None,
    ) -> None:
        if not actors and elastic is None:
            raise ValueError("Dispatcher needs at least one actor")
        self.max_inflight = max_inflight
        self.max_attempts = max_attempts
        self.replace_actor = replace_actor
        self.on_retry = on_retry
        self.elastic = elastic
        self.actors: dict[str, Any] = {}  # ready actors, the only ones given work
        self._starting: dict[Any, tuple[str, Any]] = {}  # ready ObjectRef -> (label, handle)
        self._pending = WorkQueue(order)
        self._inflight: dict[Any, WorkItem] = {}  # ObjectRef -> item
        self._load: dict[str, int] = {}
        self._idle_since: dict[str, float] = {}  # label -> when the driver saw it with no call
        self.dispatch_delays: list[float] = []
        """Seconds between an idle actor and queued work both being there and the driver handing the
        work over (the driver's own delay, whatever the actor's transport adds)."""
        self._seq = itertools.count()
        self._drained_since: float | None = None
        self.retries = 0
        self.assigned: dict[str, int] = {}
        self.infos: dict[str, ActorInfo] = {}  # label -> value of its ready ref
        self.ready_at: dict[str, float] = {}  # label -> perf_counter() when it became ready
        self.released: dict[str, float] = {}  # label -> perf_counter() when it was released
        self.setup_errors: dict[str, BaseException] = {}
        self.lost = 0
        """Work items handed to another actor because theirs was lost (its node ended or was reclaimed)."""
        self.drained: dict[str, str] = {}
        """Label -> node id of the actors retired because their node was drained."""
        self._retiring: dict[str, tuple[Any, int]] = {}  # label -> (handle, calls in flight): no new work
        self._demand: set[str] = set()  # starting actors asked for beyond the cluster's room (demand)
        self._polled_at = self._drain_polled_at = -math.inf
        starting = dict(starting or {})
        self.infos.update(infos or {})
        for label, handle in actors:
            if label in starting:
                self._starting[starting[label]] = (label, handle)
            else:
                self._add_ready(label, handle)

    # -- state --------------------------------------------------------------------------------

    @property
    def idle(self) -> bool:
        return not self._pending and not self._inflight

    @property
    def inflight(self) -> int:
        return len(self._inflight)

    @property
    def pending(self) -> int:
        return len(self._pending)

    @property
    def starting(self) -> list[str]:
        """Labels of actors whose set-up is not done yet (maybe not even placed)."""
        return [label for label, _ in self._starting.values()]

    def load(self) -> dict[str, int]:
        """Calls outstanding per ready actor (never above ``max_inflight``)."""
        return dict(self._load)

    def handles(self) -> list[tuple[str, Any]]:
        """Every actor this dispatcher still holds, ready or starting."""
        return [*self.actors.items(), *self._starting.values()]

    # -- work ---------------------------------------------------------------------------------

    def submit(self, item: WorkItem) -> None:
        item.seq = next(self._seq)
        item.queued_at = time.perf_counter()
        self._pending.push(item)
        self._drained_since = None

    def drop(self, shot: str) -> int:
        """Forget the pending (not yet dispatched) items of ``shot``; returns how many."""
        return self._pending.drop(shot)

    def pump(self) -> None:
        """Hand pending items to ready actors with room, as the work queue's policy places them."""
        # While other actors are still setting up, a ready actor takes one call at a time: a second
        # queued call would be work the next actor to come up cannot take.  Actors asked for only as
        # demand (no room for them yet) do not count: they may wait for a node for minutes.
        setting_up = any(label not in self._demand for label, _ in self._starting.values())
        cap = 1 if setting_up else self.max_inflight
        while (taken := self._pending.take(self._load, cap)) is not None:
            item, label = taken
            item.actor = label
            item.actors.append(label)
            item.attempts += 1
            item.submitted_at = time.perf_counter()
            if self._load[label] == 0:
                ready = max(item.queued_at, self._idle_since.get(label, item.queued_at))
                self.dispatch_delays.append(max(0.0, item.submitted_at - ready))
            ref = item.call(self.actors[label])
            self._inflight[ref] = item
            self._load[label] += 1
            self.assigned[label] = self.assigned.get(label, 0) + 1
            self._pending.placed(item, label)
        self._grow()
        self._check_any_left()

    def wait(self, timeout: float) -> list[Outcome]:
        """Outcomes of the items that finished within ``timeout`` seconds (maybe none).

        Also admits actors whose set-up finished, and releases idle ones when
        no pending work is left for them.
        """
        self._poll_cluster()
        self.pump()
        self._release_idle()
        watched = [*self._inflight, *self._starting]
        if not watched:
            return []
        ready, _ = ray.wait(watched, num_returns=1, timeout=timeout)
        if ready:
            # Collect everything else that is already done too, without waiting.
            more, _ = ray.wait(watched, num_returns=len(watched), timeout=0)
            ready = list(dict.fromkeys([*ready, *more]))
        outcomes: list[Outcome] = []
        for ref in ready:
            if ref in self._starting:
                self._admit(ref)
                continue
            item = self._inflight.pop(ref)
            assert item.actor is not None
            if item.actor in self._load:
                self._load[item.actor] -= 1
                if not self._load[item.actor]:
                    self._idle_since[item.actor] = time.perf_counter()
            seconds = time.perf_counter() - item.submitted_at
            try:
                outcomes.append(Outcome(item, value=ray.get(ref), seconds=seconds))
            except RayActorError as exc:
                self._actor_lost(item.actor, exc)
                if item.attempts >= self.max_attempts:
                    outcomes.append(Outcome(item, error=exc, seconds=seconds))
                else:
                    self.retries += 1
                    self.lost += 1
                    logger.warning(
                        "%s of %s chunk %d lost with %s (attempt %d); retrying elsewhere",
                        item.kind,
                        item.shot,
                        item.chunk,
                        item.actor,
                        item.attempts,
                    )
                    self.submit(item)
                    if self.on_retry is not None:
                        self.on_retry(item)
            except Exception as exc:  # noqa: BLE001 - returned to the driver to fail the shot
                outcomes.append(Outcome(item, error=unwrap(exc), seconds=seconds))
            finally:
                self._retired_call_done(item.actor)
        self.pump()
        return outcomes

    def release_all(self) -> None:
        """Release every actor still held (end of the job)."""
        for label, handle in self.handles():
            self._release(label, handle)
        for label, (handle, _) in self._retiring.items():
            self._release(label, handle)
        self.actors.clear()
        self._load.clear()
        self._starting.clear()
        self._retiring.clear()

    # -- elasticity ---------------------------------------------------------------------------

    def _add_ready(self, label: str, handle: Any) -> None:
        self.actors[label] = handle
        self._load[label] = 0
        self._idle_since[label] = time.perf_counter()
        self.assigned.setdefault(label, 0)
        self.ready_at.setdefault(label, time.perf_counter())

    def _add_starting(self, label: str, handle: Any) -> None:
        if self.elastic is None:
            # No way to tell when it is ready: queue work on it at once (Ray runs it after set-up).
            self._add_ready(label, handle)
            return
        self._starting[self.elastic.ready_call(handle)] = (label, handle)

    def _admit(self, ref: Any) -> None:
        label, handle = self._starting.pop(ref)
        self._demand.discard(label)
        try:
            self.infos[label] = ray.get(ref)
        except RayActorError as exc:
            logger.warning("render actor %s died during set-up: %s", label, exc)
            self._replace(label)
            return
        except Exception as exc:  # noqa: BLE001 - a set-up error (pack, source face) ends this actor only
            cause = unwrap(exc)
            logger.error("render actor %s failed its set-up: %s", label, cause)
            self.setup_errors[label] = cause
            self._release(label, handle)
            self._check_any_left(cause)
            return
        node = getattr(self.infos[label], "node_id", None)
        if node and node in self._draining_now():
            logger.info("render actor %s is ready on node %s, which is being drained: released", label, node)
            self.drained[label] = node
            self._release(label, handle)
            return
        self._add_ready(label, handle)
        self.ready_at[label] = time.perf_counter()
        logger.info("render actor %s ready; %d actor(s) take work", label, len(self.actors))

    def _grow(self) -> None:
        """Ask for actors up to the limit while work is pending; unplaceable ones wait as demand.

        Without a ``room`` policy every actor up to ``max_actors`` is asked for at once.  With one (the
        spec sets no ``max_actors``), each poll asks for the actors the cluster has room for now and a
        bounded number more as demand (as many as are ready: the pool at most doubles per round), so
        the pool grows as an autoscaler adds nodes, never past the work there is."""
        if self.elastic is None or not self._pending:
            return
        if len(self.setup_errors) >= self.elastic.max_actors:
            return  # new actors would fail their set-up the same way
        # Only as many as pending work could use beyond the free slots of actors held already.
        held = len(self.actors) + len(self._starting)
        want = min(self.elastic.max_actors, held + len(self._pending))
        free_slots = self._pending.room(self._load, self.max_inflight)
        starting_slots = self._pending.room(dict.fromkeys(self.starting, 0), self.max_inflight)
        if len(self._pending) <= free_slots + starting_slots or held >= want:
            return
        if self.elastic.room is None:
            self._ask(want - held, held, demand=False)
            return
        if held == 0:
            # No actor at all (all released idle, or lost): one is asked for whatever the room, at once.
            self._ask(1, 0, demand=False)
            return
        now = time.perf_counter()
        if now - self._polled_at < self.elastic.poll_seconds:
            return
        self._polled_at = now
        room = self.elastic.room(len(self.actors))
        placed = min(room.fits, want - held)
        self._ask(placed, held, demand=False)
        waiting = min(room.may_wait - len(self._demand), want - held - placed)
        self._ask(waiting, held + placed, demand=True)

    def _ask(self, count: int, held: int, *, demand: bool) -> None:
        assert self.elastic is not None
        for n in range(max(0, count)):
            label, handle = self.elastic.start_actor()
            logger.info(
                "asking for render actor %s (%d/%d)%s",
                label,
                held + n + 1,
                self.elastic.max_actors,
                " as demand: no room for it yet" if demand else "",
            )
            self._add_starting(label, handle)
            if demand:
                self._demand.add(label)

    # -- drains -------------------------------------------------------------------------------

    def _draining_now(self) -> Mapping[str, float]:
        if self.elastic is None or self.elastic.draining is None:
            return {}
        return self.elastic.draining()

    def _poll_cluster(self) -> None:
        """Retire the actors on nodes being drained (a reclaim notice): no new work goes to them, the
        calls they hold finish if the node lives long enough (else they are lost and handed on), and
        each is released once it holds none; growth asks for others meanwhile."""
        if self.elastic is None or self.elastic.draining is None:
            return
        now = time.perf_counter()
        if now - self._drain_polled_at < self.elastic.poll_seconds:
            return
        self._drain_polled_at = now
        draining = self.elastic.draining()
        if not draining:
            return
        for label in list(self.actors):
            node = getattr(self.infos.get(label), "node_id", None)
            if not isinstance(node, str) or node not in draining:
                continue
            handle, calls = self.actors.pop(label), self._load.pop(label)
            self._pending.forget(label)
            self.drained[label] = node
            deadline = draining[node]
            left = f"{deadline - time.time():.0f}s before its deadline" if deadline else "no deadline"
            logger.warning(
                "render actor %s: node %s is being drained (%s); it takes no new work, %d call(s) left",
                label,
                node,
                left,
                calls,
            )
            self._retiring[label] = (handle, calls)
            self._retired_call_done(label, finished=0)

    def _retired_call_done(self, label: str | None, *, finished: int = 1) -> None:
        """A call of a retiring actor came back (or it was just retired): release it once it holds none."""
        if label is None or label not in self._retiring:
            return
        handle, calls = self._retiring[label]
        calls -= finished
        if calls > 0:
            self._retiring[label] = (handle, calls)
            return
        del self._retiring[label]
        logger.info("render actor %s on a drained node finished its calls: released", label)
        self._release(label, handle)

    def _release_idle(self) -> None:
        """Release actors no pending work can use, once the queue has stayed empty for the grace."""
        if self.elastic is None:
            return
        if self._pending or (self.elastic.upcoming is not None and self.elastic.upcoming() > 0):
            self._drained_since = None
            return
        now = time.perf_counter()
        if self._drained_since is None:
            self._drained_since = now
            return
        if now - self._drained_since < self.elastic.idle_release_seconds:
            return
        for ref, (label, handle) in list(self._starting.items()):
            del self._starting[ref]
            logger.info("releasing render actor %s (still starting; no work left for it)", label)
            self._release(label, handle)
        for label in [k for k, n in self._load.items() if n == 0]:
            handle = self.actors.pop(label)
            del self._load[label]
            logger.info("releasing idle render actor %s", label)
            self._release(label, handle)

    def _release(self, label: str, handle: Any) -> None:
        self._demand.discard(label)
        self.released.setdefault(label, time.perf_counter())
        self._pending.forget(label)
        release = self.elastic.release_actor if self.elastic is not None else None
        try:
            if release is not None:
                release(label, handle)
            else:
                ray.kill(handle)
        except Exception as exc:  # noqa: BLE001 - already gone is fine
            logger.debug("release of %s: %s", label, exc)

    # -- failures -----------------------------------------------------------------------------

    def _actor_lost(self, label: str, exc: BaseException) -> None:
        if label in self._retiring:
            return  # its node was drained; the call is handed on and counted when it comes back
        if label not in self.actors:
            return
        logger.warning("render actor %s died: %s", label, exc)
        del self.actors[label]
        del self._load[label]
        self._pending.forget(label)
        self._replace(label)
        # Work queued on the dead actor fails with RayActorError too and is retried as it arrives.

    def _replace(self, dead: str) -> None:
        if self.replace_actor is not None:
            new_label, handle = self.replace_actor(dead)
            self._add_starting(new_label, handle)
        # Otherwise growth (if elastic) asks for another actor when pending work needs one.

    def _check_any_left(self, cause: BaseException | None = None) -> None:
        """Raise when no actor is held, work remains, and none can be started."""
        if self.actors or self._starting or not self._pending:
            return
        self._grow()
        if self._starting:
            return
        if cause is None and self.setup_errors:
            cause = list(self.setup_errors.values())[-1]
        if isinstance(cause, RecastError):
            raise cause
        raise RuntimeError("every render actor died and none could be replaced")
