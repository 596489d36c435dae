"""Sizing, starting and watching the pool of render actors.

One actor per GPU (``num_gpus=1``), several per GPU when ``gpus_per_actor`` is
fractional, or CPU actors (``num_cpus=cpus_per_actor``) on a cluster without
GPUs; ``custom`` adds custom Ray resources per actor (e.g. an accelerator
type).  There is no point in more actors than chunks.  The numbers live in the
job spec's ``resources`` block only.

How many actors (the elastic rule):

* ``max_actors`` set: exactly that many (at most one per chunk), whatever the
  cluster holds now.  Those it cannot place stay pending: on an autoscaling
  cluster they are the demand that brings up nodes, and each takes work as
  soon as its set-up is done (:class:`cluster.schedule.dispatch.Dispatcher`);
* ``max_actors`` unset: what the cluster can hold now.  If it can hold none,
  ``gpus_per_actor`` > 0 given explicitly on a cluster with no GPU at all is a
  :class:`SpecError` (most likely a CPU-only cluster and a wrong spec; set
  ``max_actors`` to wait for GPU nodes from an autoscaler instead); any other
  shortfall starts one actor, which waits as pending demand, and says so.
  While the job runs the pool then grows with the cluster (:class:`ClusterRoom`):
  the actors it has room for, and where an autoscaler runs as many more waiting
  as demand as are ready, never more than there are chunks.
"""

from __future__ import annotations

import json
import logging
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import ray

from actors.config import RenderConfig
from actors.render import RenderActor, RenderWorker
from actors.results import ActorInfo
from cluster.schedule.dispatch import Room, unwrap
from pipeline.errors import RecastError, SpecError

logger = logging.getLogger(__name__)

IDLE_RELEASE_SECONDS = 5.0
"""How long the queue stays empty before idle actors are released (nodes then scale down)."""


@dataclass(frozen=True)
class PoolPlan:
    """How many actors, and the Ray resources each one asks for.

    ``placeable`` is how many the cluster could hold when planned; the rest are pending demand.
    """

    actors: int
    num_cpus: float
    num_gpus: float
    resources: Mapping[str, float] = field(default_factory=dict)
    placeable: int | None = None

    def options(self) -> dict[str, Any]:
        opts: dict[str, Any] = {"num_cpus": self.num_cpus, "num_gpus": self.num_gpus}
        if self.resources:
            opts["resources"] = dict(self.resources)
        return opts


def plan_pool(
    cluster_resources: Mapping[str, float],
    *,
    gpus_per_actor: float | None,
    cpus_per_actor: float,
    max_actors: int | None,
    work_items: int,
    custom: Mapping[str, float] | None = None,
) -> PoolPlan:
    """Size the pool for a cluster with ``cluster_resources`` (``ray.cluster_resources()``)."""
    total_gpus = float(cluster_resources.get("GPU", 0.0))
    gpus = (1.0 if total_gpus > 0 else 0.0) if gpus_per_actor is None else float(gpus_per_actor)
    needs = {"CPU": float(cpus_per_actor), "GPU": gpus, **{k: float(v) for k, v in (custom or {}).items()}}
    fits = {
        name: math.floor(float(cluster_resources.get(name, 0.0)) / amount + 1e-9)
        for name, amount in needs.items()
        if amount > 0
    }
    placeable = min(fits.values()) if fits else work_items
    short = sorted(name for name, n in fits.items() if n == 0)
    if max_actors is not None:
        count = max_actors
    elif placeable > 0:
        count = placeable
    elif gpus_per_actor is not None and gpus > 0 and total_gpus == 0:
        raise SpecError(
            "resources.gpus_per_actor",
            f"{gpus:g} GPU(s) per actor but the cluster has no GPU; use 0 for CPU actors, "
            "or set resources.max_actors to wait for GPU nodes from an autoscaler",
        )
    else:
        count = 1
    count = max(1, min(count, max(1, work_items)))
    if count > placeable:
        logger.warning(
            "%d of %d render actor(s) cannot be placed yet (short of %s): they stay pending "
            "until the cluster grows (an autoscaler adds nodes for them)",
            count - placeable,
            count,
            ", ".join(short) or ", ".join(sorted(fits)),
        )
    return PoolPlan(
        actors=count,
        num_cpus=cpus_per_actor,
        num_gpus=gpus,
        resources=dict(custom or {}),
        placeable=placeable,
    )


ACTOR_ENV_DEFAULTS: tuple[tuple[str, str], ...] = (("MALLOC_ARENA_MAX", "2"),)
"""Environment of every render actor process (the driver's own value wins when it has one).

``MALLOC_ARENA_MAX``: glibc gives each new thread its own malloc arena (up to 8 per
core); every chunk runs its stages on fresh threads, so without a cap an actor's
resident memory creeps up chunk after chunk as arenas fragment (+15 % from a 60 s
to a 5-minute shot, measured; flat with 2).  glibc reads it at process start, so
it has to be in the actor's environment, not set from inside it."""


def actors_that_fit(plan: PoolPlan, available: Mapping[str, float]) -> int:
    """How many more actors of ``plan`` the resources ``available`` now (``ray.available_resources()``) hold."""
    needs = {"CPU": plan.num_cpus, "GPU": plan.num_gpus, **plan.resources}
    fits = [math.floor(float(available.get(k, 0.0)) / v + 1e-9) for k, v in needs.items() if v > 0]
    return max(0, min(fits)) if fits else 0


def autoscaler_running() -> bool:
    """Whether the cluster has an autoscaler that can add nodes for pending actors.

    Every head runs Ray's monitor, which publishes a status in the GCS each round with the type of
    each node.  On a cluster that cannot grow its provider is read-only and names every node's type
    after the node itself (``node_<id>``); an autoscaler (cluster launcher, KubeRay) names them from
    its config.  The v2 autoscaler says it is enabled under a key of its own.  (Ray keeps both in its
    internal KV store; a Ray without them reads as having no autoscaler.)"""
    try:
        from ray._private import ray_constants
        from ray.autoscaler._private.util import format_readonly_node_type
        from ray.experimental.internal_kv import _internal_kv_get

        if _internal_kv_get("__autoscaler_v2_enabled") == b"1":
            return True
        status = _internal_kv_get(ray_constants.DEBUG_AUTOSCALING_STATUS)
        if status is None:
            return False
        types = (json.loads(status).get("autoscaler_report") or {}).get("node_type_mapping") or {}
        return any(kind != format_readonly_node_type(node) for node, kind in types.items())
    except Exception:  # noqa: BLE001 - an older or newer Ray: behave as on a fixed cluster
        return False


def draining_nodes() -> dict[str, float]:
    """Nodes being drained (Ray's drain API: a reclaim notice, a scale-down): node id -> deadline in
    epoch seconds (0: none).  Empty where this Ray cannot tell."""
    try:
        from ray._private.state import state

        raw = state.get_draining_nodes()
    except Exception:  # noqa: BLE001 - not connected, or a Ray without the call
        return {}
    return {str(node): float(deadline_ms) / 1000.0 for node, deadline_ms in raw.items()}


class ClusterRoom:
    """The room policy of a pool the spec does not size (``resources.max_actors`` unset): as many actors as
    the cluster has room for now, and, where an autoscaler runs, as many more waiting as demand as are
    ready (so the pool doubles per round while there is work, and the autoscaler adds nodes for them)."""

    def __init__(self, plan: PoolPlan) -> None:
        self.plan = plan

    def __call__(self, ready: int) -> Room:
        fits = actors_that_fit(self.plan, ray.available_resources())
        return Room(fits=fits, may_wait=max(1, ready) if autoscaler_running() else 0)


def actor_env() -> dict[str, str]:
    """Env vars for a render actor's ``runtime_env`` (Ray merges them with the job's)."""
    return {name: os.environ.get(name, default) for name, default in ACTOR_ENV_DEFAULTS}


def actor_execution_threads(plan: PoolPlan) -> int:
    """Intra-op threads for a CPU actor: its CPU share, so actors don't oversubscribe cores."""
    return max(1, round(plan.num_cpus))


def start_actor(config: RenderConfig, plan: PoolPlan, label: str, actor_class: Any = RenderActor) -> Any:
    """Ask for one render actor; it is placed whenever the cluster has room.  Set-up runs asynchronously."""
    return actor_class.options(**plan.options(), name=None, runtime_env={"env_vars": actor_env()}).remote(
        config, label
    )


def _describe(worker: RenderWorker) -> ActorInfo:
    """Runs on the actor: its ``info()`` plus the Ray node it was placed on."""
    return replace(worker.info(), node_id=ray.get_runtime_context().get_node_id())


def ready_ref(handle: Any) -> Any:
    """An ObjectRef that resolves to the actor's info (with ``node_id``) once its set-up is done.

    It raises the actor's set-up error (bad pack, source without a face), if any.
    """
    return handle.__ray_call__.remote(_describe)


def wait_first_ready(refs: Mapping[str, Any], timeout: float | None = None) -> dict[str, ActorInfo]:
    """Wait until at least one actor is ready; the infos of every actor ready by then, by label.

    Actors still pending (no room on the cluster yet) are not waited for.  A
    set-up error is raised as the :class:`RecastError` it is, naming the file.
    """
    by_ref = {ref: label for label, ref in refs.items()}
    remaining = list(by_ref)
    infos: dict[str, ActorInfo] = {}
    first_error: BaseException | None = None
    while remaining and not infos:
        done, remaining = ray.wait(remaining, num_returns=1, timeout=timeout)
        if not done:
            raise TimeoutError(f"no render actor was ready within {timeout:g}s ({len(refs)} asked for)")
        more, remaining = (
            ray.wait(remaining, num_returns=len(remaining), timeout=0) if remaining else ([], [])
        )
        for ref in [*done, *more]:
            try:
                infos[by_ref[ref]] = ray.get(ref)
            except Exception as exc:  # noqa: BLE001 - decided below
                cause = unwrap(exc)
                if isinstance(cause, RecastError):
                    raise cause from None
                logger.warning("render actor %s did not start: %s", by_ref[ref], cause)
                first_error = first_error or exc
    if not infos:
        assert first_error is not None
        raise first_error
    return infos


class ActorPool:
    """The job's render actors: started from one plan, replaced when lost, killed at the end.

    ``actor_class`` is the Ray actor class (``RenderActor``; a stand-in with the
    same methods in the driver's scale benchmark).
    """

    def __init__(self, config: RenderConfig, plan: PoolPlan, actor_class: Any = RenderActor) -> None:
        self.config = config
        self.plan = plan
        self.actor_class = actor_class
        self.actors: list[tuple[str, Any]] = []
        """Every actor asked for, ready or not (all are killed at the end)."""
        self._next_label = 0
        for _ in range(plan.actors):
            self.start("")
        logger.info(
            "started %d render actor(s): %s",
            plan.actors,
            " ".join(
                f"{k}={v:g}" if isinstance(v, float | int) else f"{k}={v}" for k, v in plan.options().items()
            ),
        )

    def start(self, replacing: str) -> tuple[str, Any]:
        """Ask for one more actor (``replacing``: the label of a dead one, or "" for growth)."""
        label = f"actor-{self._next_label}"
        self._next_label += 1
        handle = start_actor(self.config, self.plan, label, self.actor_class)
        if replacing:
            logger.warning("replacing %s with %s", replacing, label)
        self.actors.append((label, handle))
        return label, handle

    def warm(self) -> tuple[list[ActorInfo], dict[str, Any]]:
        """Wait for the first actor's set-up; (infos of the actors ready by then, ready refs of the others).

        A set-up error (pack, source face) is raised by name.  The others may
        wait for nodes; the Dispatcher admits them as they come up.
        """
        refs = {label: ready_ref(handle) for label, handle in self.actors}
        infos = wait_first_ready(refs)
        ready = [(label, handle) for label, handle in self.actors if label in infos]
        self.actors = ready + [a for a in self.actors if a[0] not in infos]  # a ready one first
        starting = {label: ref for label, ref in refs.items() if label not in infos}
        return list(infos.values()), starting

    @property
    def first(self) -> Any:
        """A ready actor (after :meth:`warm`), for the job's one-off calls."""
        return self.actors[0][1]

    def kill_all(self) -> None:
        kill_actors(self.actors)


def shared_storage_warnings(work_url: str, shot_urls: list[str]) -> list[str]:
    """Local paths only work on a multi-node cluster if they are a shared filesystem: say so."""
    from pipeline.store import storage

    nodes = [n for n in ray.nodes() if n.get("Alive")]
    if len(nodes) < 2:
        return []
    warnings = []
    local = [url for url in shot_urls if storage.is_local(url)]
    if local:
        warnings.append(
            f"{len(nodes)} nodes but {len(local)} shot(s) on local paths (e.g. {local[0]}): "
            "every node must see them (shared filesystem), or use s3:// / gs:// URLs"
        )
    if storage.is_local(work_url):
        warnings.append(
            f"{len(nodes)} nodes but the work area {work_url} is a local path: actors on other nodes "
            "write segments there, so it must be a shared filesystem (or set output.work_url to s3:// / gs://)"
        )
    for warning in warnings:
        logger.warning("%s", warning)
    return warnings


def kill_actors(handles: list[tuple[str, Any]]) -> None:
    for _, handle in handles:
        try:
            ray.kill(handle)
        except Exception as exc:  # noqa: BLE001 - already gone is fine
            logger.debug("kill of %s: %s", handle, exc)
