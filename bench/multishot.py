"""Time to the first published shot of a multi-shot job, in each dispatch order, side by side.

One job of ``multishot_shots`` shots (astronaut clips of different lengths, the
longest first by the driver's ranking, 1 s chunks) on one actor per core (1 CPU
each), run with ``resources.dispatch_order: analysis_first`` (analyses queued on
busy actors: the order before) and with ``render_first`` (the default: a
tracked shot's renders go before later shots' analyses).  For each: time to the
first published shot, time to the first rendered chunk, job wall and fps; and
whether every shot's output is byte-identical in both runs (only the order of
work differs).  Each model set of the run (embedded pack; production-cost
stand-ins at the scaling scenario's lower frame rate) at the first clip size.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from bench.inputs import make_clip
from bench.runs import recast_spec

logger = logging.getLogger(__name__)

ORDERS = ("analysis_first", "render_first")


def multishot_spec(
    clips: list[str], out_dir: str, pack: str, source: str, cache_dir: str, order: str
) -> dict:
    """The job spec: one shot per clip, 1 s chunks, one actor per core."""
    cores = os.cpu_count() or 1
    spec = recast_spec(
        "multishot",
        clips[0],
        out_dir,
        pack,
        source,
        actors=cores,
        cpus_per_actor=1,
        chunk_seconds=1.0,
        enhance=False,
        cache_dir=cache_dir,
    )
    spec["shots"] = [{"name": f"shot{i}", "url": clip} for i, clip in enumerate(clips)]
    spec["resources"]["dispatch_order"] = order
    return spec


def run_order(spec_data: dict) -> dict[str, Any]:
    """One run of the job; its job-level figures and each shot's output sha256."""
    from cluster.driver import run_job
    from cluster.spec.job import parse_spec

    summary = run_job(parse_spec(spec_data), resume=False)  # a benchmark measures work, never reuses it
    if not summary.ok:
        errors = "; ".join(f"{s.name}: {s.error}" for s in summary.shots if s.error)
        raise RuntimeError(f"recast job {spec_data['job_id']} failed: {errors}")
    return {
        "actors": summary.actors,
        "frames": summary.frames,
        "chunks": sum(s.chunks for s in summary.shots),
        "first_shot_seconds": summary.first_shot_seconds,
        "first_chunk_seconds": summary.first_chunk_seconds,
        "setup_seconds": summary.setup_seconds,
        "wall_seconds": summary.wall_seconds,
        "job_fps": summary.fps,
        "output_sha256": {s.name: s.output_sha256 for s in summary.shots},
    }


def multishot_scenario(ctx: Any) -> dict:
    """Both orders on each model set (``ctx``: :class:`bench.scenarios.Context`)."""
    settings = ctx.settings
    size, shots = settings.sizes[0], settings.multishot_shots
    result: dict[str, Any] = {"shots": shots, "size": size, "sets": {}}
    for set_name, pack in ctx.packs:
        fps = settings.fps if set_name == "default" else settings.scaling_production_fps
        # The longest first in the spec's order is not needed: the driver ranks shots by their work.
        lengths = [settings.multishot_seconds + 0.5 * i for i in range(shots)]
        clips = [make_clip(os.path.join(ctx.out, "clips"), size, seconds, fps) for seconds in lengths]
        runs: dict[str, dict] = {}
        for order in ORDERS:
            logger.info("[multishot %s] %d shots, dispatch_order %s", set_name, shots, order)
            out_dir = os.path.join(ctx.out, "runs", f"multishot-{set_name}-{order}")
            spec = multishot_spec(clips, out_dir, pack, ctx.source, ctx.cache_dir, order)
            spec["job_id"] = f"bench-multishot-{set_name}"  # the same job in both orders
            runs[order] = run_order(spec)
        before, after = (runs[o] for o in ORDERS)
        result["sets"][set_name] = {
            "fps": fps,
            "shot_seconds": lengths,
            "runs": runs,
            "identical_outputs": before["output_sha256"] == after["output_sha256"],
        }
    return result


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} s"


def multishot_table(figures: dict) -> str:
    """Time to first published shot before (analysis_first) and after (render_first), per model set."""
    if "error" in figures:
        return f"multi-shot job: failed: {figures['error']}"
    title = (
        f"Multi-shot job: {figures['shots']} shots at {figures['size']}, 1 s chunks, one actor per core "
        "(time to first published shot: resources.dispatch_order analysis_first = before, render_first = now)"
    )
    header = (
        f"  {'model set':<12} {'order':<15} {'first shot':>11} {'after set-up':>13} {'first chunk':>12} "
        f"{'job wall':>10} {'job fps':>8}  outputs"
    )
    lines = [title, header]
    for set_name, case in figures["sets"].items():
        same = "identical" if case["identical_outputs"] else "DIFFER"
        for order, run in case["runs"].items():
            first = run["first_shot_seconds"]
            after = None if first is None else first - run["setup_seconds"]
            lines.append(
                f"  {set_name:<12} {order:<15} {_s(first):>11} {_s(after):>13} "
                f"{_s(run['first_chunk_seconds']):>12} {_s(run['wall_seconds']):>10} {run['job_fps']:>8.2f}  {same}"
            )
    return "\n".join(lines)
