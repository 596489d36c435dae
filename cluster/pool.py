"""Sizing and starting the pool of render actors from the cluster's resources.

One actor per GPU (``num_gpus=1``), several per GPU when ``gpus_per_actor`` is
fractional, or CPU actors (``num_cpus=cpus_per_actor``) on a cluster without
GPUs; ``max_actors`` caps the count, and there is no point in more actors than
chunks.  The numbers live in the job spec's ``resources`` block only.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import ray

from actors.render import RenderActor, RenderConfig
from pipeline.errors import SpecError

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class PoolPlan:
    """How many actors, and the Ray resources each one asks for."""

    actors: int
    num_cpus: float
    num_gpus: float

    def options(self) -> dict[str, Any]:
        return {"num_cpus": self.num_cpus, "num_gpus": self.num_gpus}


def plan_pool(
    cluster_resources: Mapping[str, float],
    *,
    gpus_per_actor: float | None,
    cpus_per_actor: float,
    max_actors: int | None,
    work_items: int,
) -> PoolPlan:
    """Size the pool for a cluster with ``cluster_resources`` (``ray.cluster_resources()``)."""
    total_gpus = float(cluster_resources.get("GPU", 0.0))
    total_cpus = float(cluster_resources.get("CPU", 0.0))
    gpus = (1.0 if total_gpus > 0 else 0.0) if gpus_per_actor is None else float(gpus_per_actor)
    if gpus > 0:
        if total_gpus < gpus:
            raise SpecError(
                "resources.gpus_per_actor",
                f"{gpus:g} GPU(s) per actor but the cluster has {total_gpus:g}; use 0 for CPU actors",
            )
        count = math.floor(total_gpus / gpus + 1e-9)
        # A GPU actor still needs its CPU share; don't let the CPU count starve it.
        if cpus_per_actor > 0 and total_cpus > 0:
            count = min(count, max(1, math.floor(total_cpus / cpus_per_actor + 1e-9)))
    else:
        if total_cpus < cpus_per_actor:
            raise SpecError(
                "resources.cpus_per_actor",
                f"{cpus_per_actor:g} CPU(s) per actor but the cluster has {total_cpus:g}",
            )
        count = math.floor(total_cpus / cpus_per_actor + 1e-9)
    if max_actors is not None:
        count = min(count, max_actors)
    count = max(1, min(count, max(1, work_items)))
    return PoolPlan(actors=count, num_cpus=cpus_per_actor, num_gpus=gpus)


def actor_execution_threads(plan: PoolPlan) -> int:
    """Intra-op threads for a CPU actor: its CPU share, so actors don't oversubscribe cores."""
    return max(1, round(plan.num_cpus))


def start_actors(config: RenderConfig, plan: PoolPlan, *, first_label: int = 0) -> list[tuple[str, Any]]:
    """Start ``plan.actors`` render actors; returns (label, handle) pairs.  Set-up runs asynchronously."""
    handles = []
    for i in range(first_label, first_label + plan.actors):
        label = f"actor-{i}"
        handle = RenderActor.options(**plan.options(), name=None).remote(config, label)
        handles.append((label, handle))
    logger.info(
        "started %d render actor(s): num_cpus=%g num_gpus=%g", plan.actors, plan.num_cpus, plan.num_gpus
    )
    return handles


def kill_actors(handles: list[tuple[str, Any]]) -> None:
    for _, handle in handles:
        try:
            ray.kill(handle)
        except Exception as exc:  # noqa: BLE001 - already gone is fine
            logger.debug("kill of %s: %s", handle, exc)
