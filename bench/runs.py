"""One measured run: the naive loop, or one Recast job, and a clip's full comparison of the two.

Every run returns a flat record (``runner``, ``actors``, ``frames``, ``fps``,
``stage_seconds`` in the table's columns, ``model_busy_share``, peak memory ...)
that ``bench.json`` stores as it is; a Recast run also its ``quality``, read from the
QC of its own job summary (``quality.py``).
"""

from __future__ import annotations

import logging
import os
import re
import resource

from bench.memory import ActorMemoryPoller
from bench.quality import IDENTITY_EVERY, quality_of
from bench.settings import Settings
from pipeline.video.encode import EncodeSettings

logger = logging.getLogger(__name__)

MODEL_STAGES = ("analyze", "render.swap", "render.enhance")
"""Recast stage keys spent inside model sessions (analyze = detect + recognise)."""


def encode_settings() -> EncodeSettings:
    """libx264 veryfast for every runner: the encoder is not what is being compared."""
    return EncodeSettings(codec="h264", preset="veryfast", quality=18, hardware=False)


def slug(label: str) -> str:
    """``label`` as a file or job name."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", label).strip("-")


def _self_peak_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, 1)


def run_naive(clip: str, out_dir: str, pack: str, source: str, enhance: bool, cache_dir: str) -> dict:
    """The naive loop on ``clip``; stage seconds mapped to the table's columns."""
    from bench.naive import naive_render

    result = naive_render(
        clip,
        os.path.join(out_dir, "naive.mp4"),
        pack_url=pack,
        source_image=source,
        face_index=0,
        enhance=enhance,
        encode=encode_settings(),
        pack_cache_dir=cache_dir,
    )
    s = result.stage_seconds
    stages = {
        "decode": s.get("decode", 0.0),
        "detect+recog": s.get("detect", 0.0) + s.get("recognize", 0.0),
        "align": s.get("align", 0.0),
        "swap": s.get("swap", 0.0),
        "enhance": s.get("enhance", 0.0),
        "paste": s.get("paste", 0.0),
        "encode": s.get("encode", 0.0),
    }
    model = s.get("detect", 0.0) + s.get("recognize", 0.0) + s.get("swap", 0.0) + s.get("enhance", 0.0)
    return {
        "runner": "naive",
        "actors": 1,
        "frames": result.frames,
        "faces_swapped": result.faces_swapped,
        "fps": result.fps,
        "seconds": result.loop_seconds,
        "setup_seconds": result.setup_seconds,
        "stage_seconds": stages,
        "detail_stage_seconds": s,
        "model_busy_share": model / result.loop_seconds if result.loop_seconds else 0.0,
        # The loop runs in this (driver) process, whose peak also covers earlier work: not an actor figure.
        "peak_rss_mb": [],
        "driver_max_rss_mb": _self_peak_mb(),
        "encoder": result.encoder,
    }


def recast_spec(
    label: str,
    clip: str,
    out_dir: str,
    pack: str,
    source: str,
    *,
    actors: int,
    cpus_per_actor: int,
    chunk_seconds: float,
    enhance: bool,
    cache_dir: str,
    winograd: bool = True,
    qc: bool = True,
) -> dict:
    """The job spec of one Recast run (``winograd=False``: ONNX Runtime's own CPU convolutions;
    ``qc=False``: no QC in the actors or the driver).  QC measures identity on every
    :data:`~bench.quality.IDENTITY_EVERY`-th frame of a track."""
    enc = encode_settings()
    return {
        "job_id": "bench-" + slug(label),
        "shots": [{"name": "shot", "url": clip}],
        "identities": {"hero": {"images": [source], "face_index": 0}},
        "selection": {"mode": "all", "source": "hero"},
        "faces": {"enhance": enhance},
        # No models.cache_dir: a spec's must lie under the cache root; jobs use the root's packs folder.
        "models": {"pack": pack, "execution": {"cpu_winograd": winograd}},
        "output": {
            "url": os.path.join(out_dir, "{shot}.mp4"),
            "codec": enc.codec,
            "preset": enc.preset,
            "quality": enc.quality,
            "hardware": enc.hardware,
            "if_exists": "overwrite",
            "work_url": os.path.join(out_dir, "work"),
        },
        "chunking": {"seconds": chunk_seconds, "min_seconds": 1.0},
        "resources": {"cpus_per_actor": cpus_per_actor, "max_actors": actors},
        "qc": {"enabled": qc, "identity_every": IDENTITY_EVERY},
    }


def run_recast(spec_data: dict, *, local_ray: bool) -> dict:
    """One job through ``run_job``; figures from its JobSummary plus the memory poller."""
    from cluster.driver import run_job
    from cluster.spec.job import parse_spec

    spec = parse_spec(spec_data)
    with ActorMemoryPoller(only_descendants=local_ray) as poller:
        summary = run_job(spec, resume=False)  # a benchmark measures work, never reuses it
    if not summary.ok:
        errors = "; ".join(f"{s.name}: {s.error}" for s in summary.shots if s.error)
        raise RuntimeError(f"recast job {spec.job_id} failed: {errors}")
    shot = summary.shots[0]
    st = shot.stage_seconds
    stages = {
        "decode": st.get("decode", 0.0),
        "detect+recog": st.get("analyze", 0.0),
        "align": st.get("render.align", 0.0),
        "swap": st.get("render.swap", 0.0),
        "enhance": st.get("render.enhance", 0.0),
        "paste": st.get("render.paste", 0.0),
        "encode": st.get("encode", 0.0),
        "upload": st.get("upload", 0.0),
        "merge": st.get("merge", 0.0),
    }
    model = sum(st.get(k, 0.0) for k in MODEL_STAGES)
    # Actor-seconds available: every actor from warm to the end of the job.
    available = summary.actors * max(1e-9, summary.wall_seconds - summary.setup_seconds)
    merge = st.get("merge", 0.0)
    return {
        "runner": "recast",
        "actors": summary.actors,
        "chunks": shot.chunks,
        "frames": shot.frames,
        "faces_swapped": shot.faces_swapped,
        "fps": shot.fps,
        "seconds": shot.seconds,
        "job_fps": summary.fps,
        "job_wall_seconds": summary.wall_seconds,
        "setup_seconds": summary.setup_seconds,
        "first_chunk_seconds": summary.first_chunk_seconds,
        "decode_calls_per_frame": summary.decode_calls_per_frame,
        "stage_seconds": stages,
        "detail_stage_seconds": dict(st),
        "model_busy_share": model / available,
        "peak_rss_mb": poller.peaks(),
        "merge_mb_per_s": (shot.output_bytes / 1e6 / merge) if merge > 0 else None,
        "output_mb": shot.output_bytes / 1e6,
        "encoder": shot.encoder,
        "providers": shot.providers,
        "quality": quality_of(shot.qc.to_dict() if shot.qc is not None else None),
        "marking": marking_cost(st, summary.wall_seconds),
    }


DRIVER_STAGES = frozenset({"track", "plan", "merge", "sign"})
"""Stage times the driver spends (the rest are the actors' calls)."""


def marking_cost(stages: dict[str, float], wall_seconds: float) -> dict[str, float]:
    """What marking every output as AI-made cost a run: the watermark inside the actors' render calls
    (``render.mark``) as a share of the actors' stage seconds, and signing at the publish on the
    driver (``sign``) as a share of the job's wall time."""
    actor = sum(v for k, v in stages.items() if "." not in k and k not in DRIVER_STAGES)
    mark, sign = stages.get("render.mark", 0.0), stages.get("sign", 0.0)
    return {
        "mark_seconds": mark,
        "sign_seconds": sign,
        "actor_stage_seconds": actor,
        "mark_share": mark / actor if actor > 0 else 0.0,
        "sign_share_of_wall": sign / wall_seconds if wall_seconds > 0 else 0.0,
    }


def compare(
    settings: Settings,
    *,
    label: str,
    clip: str,
    pack: str,
    source: str,
    enhance: bool,
    chunk_seconds: float,
    cache_dir: str,
    local_ray: bool,
    direct_row: bool = False,
    qc_cost_row: bool = False,
) -> dict:
    """Naive loop, Recast 1 actor x all cores, Recast one actor per core, on one clip.

    ``direct_row``: also Recast one actor per core with ONNX Runtime's own
    convolutions (``recast_<N>_direct``), which says how much of the speed-up is
    the Winograd rewrite and how much the pipeline.  ``qc_cost_row``: also Recast
    one actor per core with QC off (``recast_<N>_noqc``), right after the same run
    with QC on: QC's own cost (``qc_cost``, derived in ``report.py``).
    """
    cores = settings.cores
    out_dir = os.path.join(os.path.abspath(settings.out), "runs", slug(label))
    os.makedirs(out_dir, exist_ok=True)
    logger.info("[%s] naive loop", label)
    naive = run_naive(clip, out_dir, pack, source, enhance, cache_dir)
    runs: dict[str, dict] = {"naive": naive}
    plan = [("recast_1", 1, cores, True, True), (f"recast_{cores}", cores, 1, True, True)]
    if qc_cost_row:
        plan.append((f"recast_{cores}_noqc", cores, 1, True, False))
    if direct_row:
        plan.append((f"recast_{cores}_direct", cores, 1, False, True))
    for name, actors, cpus, winograd, qc in plan:
        if name in runs:
            continue
        logger.info("[%s] %s: %d actor(s) x %d cpu, qc %s", label, name, actors, cpus, qc)
        spec = recast_spec(
            f"{label}-{name}",
            clip,
            os.path.join(out_dir, name),
            pack,
            source,
            actors=actors,
            cpus_per_actor=cpus,
            chunk_seconds=chunk_seconds,
            enhance=enhance,
            cache_dir=cache_dir,
            winograd=winograd,
            qc=qc,
        )
        runs[name] = run_recast(spec, local_ray=local_ray)
    for run in runs.values():
        run["speedup"] = run["fps"] / naive["fps"] if naive["fps"] else None
    many = runs[f"recast_{cores}"]
    one = runs["recast_1"]
    return {
        "label": label,
        "clip": clip,
        "pack": pack,
        "enhance": enhance,
        "runs": runs,
        "actors_time_ratio": many["seconds"] / one["seconds"] if one["seconds"] else None,
        "quality": many["quality"],
        "qc_identity_every": IDENTITY_EVERY,
    }
