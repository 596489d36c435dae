"""The benchmark's scenarios beside the comparisons: 4-chunk scaling, memory, the demo job, scale, plates,
steadiness.

Each scenario is a function of a :class:`Context` that returns the record stored
under its key in ``bench.json``; :data:`SCENARIOS` lists them in the order they
run, each with the settings switch that turns it on.  They run after the
comparisons, and a failing one records its error instead of stopping the run.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bench.inputs import make_clip
from bench.multishot import multishot_scenario
from bench.runs import recast_spec, run_recast, slug
from bench.settings import Settings

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Context:
    """What every scenario may use: the settings and the inputs already prepared."""

    settings: Settings
    source: str
    """The source identity picture."""
    cache_dir: str
    """Model pack cache."""
    packs: tuple[tuple[str, str], ...]
    """(set name, pack url) of each model set: ``default``, and ``production`` when the
    comparisons or the scaling figure run."""
    local_ray: bool
    """True when this process started its own Ray instance (peak memory of its actors only)."""

    @property
    def out(self) -> str:
        return os.path.abspath(self.settings.out)


@dataclass(frozen=True)
class Scenario:
    """One optional figure: its ``bench.json`` key, when it runs, and how."""

    key: str
    enabled: Callable[[Settings], bool]
    run: Callable[[Context], dict]
    in_ray: bool = True
    """Runs on the benchmark's Ray instance (False: starts and stops its own cluster)."""


def scaling_scenario(ctx: Context) -> dict:
    """One 4-chunk shot on 1 actor and on one actor per core, every actor 1 CPU.

    The per-actor resources are held equal (each actor reserves 1 CPU and runs 1
    intra-op thread and 1 codec thread per stage), so the ratio says how well the
    chunks of one shot spread over actors (a shot rendered as one chain would give
    1.0).  The comparisons' ``actors_time_ratio`` is the other question: 1 actor
    given every core against the same cores split between actors.
    """
    settings = ctx.settings
    cores = settings.cores
    result: dict[str, Any] = {"chunks": 4, "cpus_per_actor": 1, "size": settings.sizes[0], "sets": {}}
    for set_name, pack in ctx.packs:
        if set_name == "default":
            fps, chunk_seconds = settings.fps, settings.scaling_chunk_seconds
        else:
            fps, chunk_seconds = settings.scaling_production_fps, 1.0
        clip = make_clip(os.path.join(ctx.out, "clips"), settings.sizes[0], 4 * chunk_seconds, fps)
        runs: dict[str, dict] = {}
        for actors in sorted({1, cores}):
            label = f"scaling {set_name} {actors}"
            logger.info("[%s] %d actor(s) x 1 cpu", label, actors)
            spec = recast_spec(
                label,
                clip,
                os.path.join(ctx.out, "runs", slug(label)),
                pack,
                ctx.source,
                actors=actors,
                cpus_per_actor=1,
                chunk_seconds=chunk_seconds,
                enhance=False,
                cache_dir=ctx.cache_dir,
            )
            run = run_recast(spec, local_ray=ctx.local_ray)
            runs[str(actors)] = {
                k: run[k] for k in ("actors", "chunks", "frames", "fps", "seconds", "model_busy_share")
            }
        one, many = runs["1"], runs[str(cores)]
        result["sets"][set_name] = {
            "clip": clip,
            "fps": fps,
            "chunk_seconds": chunk_seconds,
            "runs": runs,
            "time_ratio": many["seconds"] / one["seconds"] if one["seconds"] else None,
        }
    return result


def memory_scenario(ctx: Context) -> dict:
    """Peak actor RSS for a 60 s and a 5-minute shot (default pack, 320x180, low frame rate)."""
    settings = ctx.settings
    clips = os.path.join(ctx.out, "clips")
    result: dict[str, Any] = {"fps": settings.memory_fps, "size": "320x180", "shots": {}}
    for seconds in (60.0, 300.0):
        clip = make_clip(clips, "320x180", seconds, settings.memory_fps)
        spec = recast_spec(
            f"memory-{int(seconds)}s",
            clip,
            os.path.join(ctx.out, "runs", f"memory_{int(seconds)}s"),
            "builtin:default",
            ctx.source,
            actors=1,
            cpus_per_actor=settings.cores,
            chunk_seconds=20.0,
            enhance=False,
            cache_dir=ctx.cache_dir,
        )
        run = run_recast(spec, local_ray=ctx.local_ray)
        result["shots"][f"{int(seconds)}s"] = {
            "frames": run["frames"],
            "chunks": run["chunks"],
            "peak_rss_mb": run["peak_rss_mb"],
            "fps": run["fps"],
        }
    a = max(result["shots"]["60s"]["peak_rss_mb"] or [0.0])
    b = max(result["shots"]["300s"]["peak_rss_mb"] or [0.0])
    result["growth"] = (b - a) / a if a else None
    return result


def demo_scenario(ctx: Context) -> dict:
    """The demo job (``jobs.demo``'s spec and clip) with 1 actor and with one actor per core."""
    from jobs.demo import demo_spec, write_demo_inputs

    settings = ctx.settings
    out_dir = os.path.join(ctx.out, "demo")
    plate, source = write_demo_inputs(out_dir, seconds=settings.demo_seconds, width=640, height=360, fps=24)
    result: dict[str, Any] = {"seconds": settings.demo_seconds, "runs": {}}
    for actors in sorted({1, settings.cores}):
        spec = demo_spec(out_dir, plate, source, actors=actors, cpus=settings.cores)
        spec["job_id"] = f"bench-demo-{actors}"
        spec["output"]["url"] = os.path.join(out_dir, f"a{actors}", "{shot}.mp4")
        run = run_recast(spec, local_ray=ctx.local_ray)
        result["runs"][str(actors)] = {
            k: run[k]
            for k in (
                "actors",
                "chunks",
                "frames",
                "fps",
                "job_fps",
                "seconds",
                "first_chunk_seconds",
                "setup_seconds",
            )
        }
    return result


def scale_scenario(ctx: Context) -> dict:
    """The real driver on a simulated feature-film job (its own Ray instance; see
    ``bench.driver_scale.scale``)."""
    import logging as logging_

    import ray

    from bench.driver_scale.scale import ScaleSettings, run_scale

    settings = ctx.settings
    scale = ScaleSettings(
        out=os.path.join(ctx.out, "scale"),
        shots=settings.scale_shots,
        chunks_per_shot=settings.scale_chunks_per_shot,
        actors=settings.scale_actors,
        hosts=max(1, min(16, settings.scale_actors // 16)),
        time_scale=settings.scale_time_scale,
    )
    ray.init(logging_level=logging_.WARNING, include_dashboard=False)
    try:
        figures = run_scale(scale)
        if settings.scale_crowd_shots:  # the crowd case: the same cluster, many faces per frame
            crowd = dataclasses.replace(
                scale,
                out=os.path.join(ctx.out, "scale-crowd"),
                shots=settings.scale_crowd_shots,
                faces_per_frame=settings.scale_crowd_faces,
            )
            figures["crowd"] = run_scale(crowd)
        return figures
    finally:
        ray.shutdown()


def plates_scenario(ctx: Context) -> dict:
    """Film plates: frame I/O per actor, the colour round trip, a job beside ProRes 4444 (its own Ray;
    see ``bench.film_plates.plate_figures``)."""
    from bench.film_plates.plate_figures import PlateSettings, run_plates

    settings = ctx.settings
    plates = PlateSettings(
        out=ctx.out,
        cores=settings.cores,
        sizes=settings.plates_sizes,
        frames=settings.plates_frames,
        job_frames=settings.plates_job_frames,
        job_size=settings.plates_job_size,
        repeats=1 if settings.tiny else 3,
        local_ray=ctx.local_ray,
    )
    return run_plates(plates, source=ctx.source, cache_dir=ctx.cache_dir)


def steady_scenario(ctx: Context) -> dict:
    """The paste's steadiness on 1080p and 4K plates with the default pack (``bench.steady``)."""
    from bench.steady import steadiness
    from pipeline.models.loader import load_face_models
    from pipeline.models.pack import load_pack
    from pipeline.models.runtime.settings import ExecutionConfig

    pack = load_pack("builtin:default", cache_dir=ctx.cache_dir)
    return steadiness(load_face_models(pack, ExecutionConfig(providers=("CPUExecutionProvider",))))


SCENARIOS: tuple[Scenario, ...] = (
    Scenario("scaling", lambda s: s.scaling and s.cores > 1, scaling_scenario),
    Scenario("memory", lambda s: s.memory, memory_scenario),
    Scenario("demo", lambda s: s.demo, demo_scenario),
    Scenario("multishot", lambda s: s.multishot, multishot_scenario),
    Scenario("scale", lambda s: s.scale, scale_scenario, in_ray=False),
    Scenario("plates", lambda s: s.plates, plates_scenario, in_ray=False),
    Scenario("steady", lambda s: s.steady, steady_scenario, in_ray=False),
)
"""The optional scenarios, in the order they run (after the comparisons)."""
