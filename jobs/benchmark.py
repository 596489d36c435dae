"""Benchmark: Recast against the naive face-swap loop, on generated clips of real faces.

Locally (starts its own Ray instance, never joins another one on the machine)::

    .venv/bin/python -m jobs.benchmark                    # full table (about 15-20 min on 2 cores)
    .venv/bin/python -m jobs.benchmark --quick            # a few minutes
    .venv/bin/python -m jobs.benchmark --memory --demo    # plus memory flatness and the demo job
    .venv/bin/python -m jobs.benchmark --seconds 60 --production-seconds 60   # the issue's full length

On a cluster (joins ``RAY_ADDRESS``; peak memory is read only for actors on the driver's node)::

    ray job submit --working-dir . -- python -m jobs.benchmark --out /shared/bench

What runs, in one process tree and one run:

* inputs: 720p and 1080p clips of the astronaut (``jobs.democlip``), the source face
  from insightface's sample picture; nothing downloaded;
* two model sets: the embedded default pack, and a "production-cost" pack whose
  recognizer, swapper and enhancer are stand-ins with the production contracts and
  roughly production cost (ArcFace w600k_r50, inswapper_128, GFPGAN 1.4 sized, see
  ``tests/standins.py``) and whose detector is the default pack's real YuNet, so
  faces are really found and swapped (the SCRFD-sized stand-in fires on bright cells,
  not faces; its cost is measured in the ceiling table instead);
* per clip and model set: the naive loop (``jobs.naive``), Recast with 1 actor using
  every core, Recast with one actor per core; with the production set also Recast
  one actor per core without the CPU Winograd rewrite (``recast_<N>_direct``, an
  ablation: how much of the gain is the rewrite, how much the pipeline) and a
  swap + enhance row at 720p;
* the ceiling: each stage's CPU-seconds per frame, models single-threaded, on a few
  frames; machine limit = cores / total; efficiency = achieved / limit.  For the
  production set also with ONNX Runtime's own convolutions, as the naive loop runs
  the models (its efficiency is measured against that ceiling);
* issue 5's scaling figure: a 4-chunk shot (both model sets) on 1 actor and on one
  actor per core, every actor reserving 1 CPU (``--no-scaling`` skips it);
* optional: ``--memory`` (peak actor memory for a 60 s and a 5-minute shot) and
  ``--demo`` (the demo job's fps with 1 and N actors, time to first chunk).

Writes ``bench.json`` and ``bench.txt`` (the table) into ``--out``.  The production
set costs about 1.5 CPU-s per face for the swapper alone (0.7 with the Winograd
rewrite), so its clips default to 4 s, 2 s with ``--quick`` (``--production-seconds``);
every figure names the clip length it used.
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from jobs.bench_memory import ActorMemoryPoller
from jobs.democlip import make_face_clip, write_source_image

logger = logging.getLogger("jobs.benchmark")

RESOLUTIONS = {"720p": (1280, 720), "1080p": (1920, 1080)}
MODEL_STAGES = ("analyze", "render.swap", "render.enhance")
"""Recast stage keys spent inside model sessions (analyze = detect + recognise)."""
STAGE_COLUMNS = ("decode", "detect+recog", "align", "swap", "enhance", "paste", "encode", "upload", "merge")
TARGETS = {
    "speedup_2_actors": 1.5,
    "efficiency": 0.85,
    "model_busy_share": 0.85,
    "memory_flat": 0.10,
    "four_chunk_ratio": 0.65,
}


@dataclass(frozen=True)
class Settings:
    """What to run; defaults fit a 2-core machine in about 15-20 minutes."""

    out: str
    sizes: tuple[str, ...] = ("720p", "1080p")
    fps: int = 24
    default_seconds: float = 6.0
    production_seconds: float = 4.0
    """Long enough that start-up transients (a second actor still loading its models
    while the first one works: about 2 s with the Winograd rewrite) stay a few per cent."""
    default_chunk_seconds: float = 1.5
    production_chunk_seconds: float = 2.0
    enhance_row: bool = True
    ceiling_frames: int = 3
    memory: bool = False
    memory_fps: int = 4
    demo: bool = False
    demo_seconds: float = 20.0
    compare: bool = True
    """The naive-vs-Recast comparisons and ceilings (off: only the optional scenarios)."""
    scaling: bool = True
    """Issue 5's figure: a 4-chunk shot on 1 actor and on one actor per core, 1 CPU each."""
    scaling_chunk_seconds: float = 2.0
    """Default-pack chunk length of the scaling shot (4 chunks)."""
    scaling_production_fps: int = 6
    """Frame rate of the production-set scaling shot (4 chunks of 1 s; keeps it to minutes)."""
    tiny: bool = False
    """Test scale: small frames, tiny stand-ins for the production set (figures meaningless)."""

    @property
    def cores(self) -> int:
        return os.cpu_count() or 1


# ------------------------------------------------------------------------------------ inputs
def _dims(size: str) -> tuple[int, int]:
    if size in RESOLUTIONS:
        return RESOLUTIONS[size]
    w, h = size.lower().split("x")
    return int(w), int(h)


def make_clip(folder: str, size: str, seconds: float, fps: int) -> str:
    """The astronaut clip at ``size`` (keyframe every second so chunks can start anywhere)."""
    width, height = _dims(size)
    path = os.path.join(folder, f"astronaut_{width}x{height}_{seconds:g}s_{fps}fps.mp4")
    if not os.path.exists(path):
        tmp = path + ".tmp.mp4"
        make_face_clip(tmp, seconds=seconds, fps=fps, width=width, height=height, gop=fps)
        os.replace(tmp, path)
    return path


def production_pack(folder: str, cache_dir: str, *, tiny: bool) -> str:
    """A pack folder: the default pack's real YuNet + production-cost (or tiny) stand-ins."""
    from pipeline.models.default_pack import YUNET_CONTRACT, YUNET_FILE
    from pipeline.models.pack import load_pack
    from tests.standins import (
        CONTRACTS,
        PRODUCTION_FILES,
        write_manifest,
        write_model,
        write_production_models,
    )

    pack_dir = os.path.join(folder, "tiny-pack" if tiny else "production-pack")
    if os.path.exists(os.path.join(pack_dir, "manifest.json")):
        return pack_dir
    os.makedirs(pack_dir, exist_ok=True)
    default = load_pack("builtin:default", cache_dir=cache_dir)
    shutil.copyfile(os.path.join(default.local_dir, YUNET_FILE), os.path.join(pack_dir, YUNET_FILE))
    entries: list[dict[str, Any]] = [
        {"role": "detector", "kind": "yunet", "file": YUNET_FILE, "contract": YUNET_CONTRACT}
    ]
    roles = ("recognizer", "swapper", "enhancer")
    if tiny:
        for role in roles:
            write_model(role, os.path.join(pack_dir, PRODUCTION_FILES[role][1]), "tiny")
    else:
        models_dir = os.path.join(folder, "models")
        write_production_models(models_dir)
        for role in roles:
            file = PRODUCTION_FILES[role][1]
            dest = os.path.join(pack_dir, file)
            try:
                os.link(os.path.join(models_dir, file), dest)  # the swapper alone is 550 MB
            except OSError:
                shutil.copyfile(os.path.join(models_dir, file), dest)
    for role in roles:
        kind, file = PRODUCTION_FILES[role]
        entries.append({"role": role, "kind": kind, "file": file, "contract": CONTRACTS[role]})
    write_manifest(pack_dir, entries, name="bench-production-cost" if not tiny else "bench-tiny")
    return pack_dir


# ------------------------------------------------------------------------------------ runs
def run_naive(clip: str, out_dir: str, pack: str, source: str, enhance: bool, cache_dir: str) -> dict:
    """The naive loop on ``clip``; stage seconds mapped to the table's columns."""
    from jobs.naive import naive_render

    result = naive_render(
        clip,
        os.path.join(out_dir, "naive.mp4"),
        pack_url=pack,
        source_image=source,
        face_index=0,
        enhance=enhance,
        encode=_encode_settings(),
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


def _self_peak_mb() -> float:
    import resource

    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, 1)


def _encode_settings():
    from pipeline.encode import EncodeSettings

    # libx264 veryfast for both runners: the encoder is not what is being compared.
    return EncodeSettings(codec="h264", preset="veryfast", quality=18, hardware=False)


def _slug(label: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", label).strip("-")


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
) -> dict:
    """The job spec of one Recast run (``winograd=False``: ONNX Runtime's own CPU convolutions)."""
    enc = _encode_settings()
    return {
        "job_id": "bench-" + _slug(label),
        "shots": [{"name": "shot", "url": clip}],
        "identities": {"hero": {"images": [source], "face_index": 0}},
        "selection": {"mode": "all", "source": "hero"},
        "faces": {"enhance": enhance},
        "models": {"pack": pack, "cache_dir": cache_dir, "execution": {"cpu_winograd": winograd}},
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
    }


def run_recast(spec_data: dict, *, local_ray: bool) -> dict:
    """One job through ``run_job``; figures from its JobSummary plus the memory poller."""
    from cluster.driver import run_job
    from cluster.spec import parse_spec

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
        "stage_seconds": stages,
        "detail_stage_seconds": dict(st),
        "model_busy_share": model / available,
        "peak_rss_mb": poller.peaks(),
        "merge_mb_per_s": (shot.output_bytes / 1e6 / merge) if merge > 0 else None,
        "output_mb": shot.output_bytes / 1e6,
        "encoder": shot.encoder,
        "providers": shot.providers,
    }


# ------------------------------------------------------------------------------------ ceiling
def measure_ceiling(
    clip: str, pack: str, source: str, *, frames: int, enhance: bool, cache_dir: str, winograd: bool = True
) -> dict:
    """CPU-seconds per frame of each stage, models on one intra-op thread, on ``frames`` frames.

    ``winograd``: Recast's CPU sessions (large 3x3 convolutions as Winograd F(4x4, 3x3));
    False: ONNX Runtime's direct convolutions, as the naive loop runs the models.
    """
    import tempfile

    import av

    from pipeline.chunking import Chunk
    from pipeline.decode import Frame
    from pipeline.encode import SegmentWriter, choose_encoder
    from pipeline.faces.analyze import FaceAnalyzer
    from pipeline.faces.config import FaceConfig
    from pipeline.faces.identity import load_identity
    from pipeline.faces.renderers.cpu import FaceRenderer
    from pipeline.faces.types import FaceTask
    from pipeline.models.loader import load_face_models
    from pipeline.models.pack import load_pack
    from pipeline.models.runtime.settings import ExecutionConfig
    from pipeline.probe import probe

    execution = ExecutionConfig(intra_op_threads=1, cpu_winograd=winograd)
    models = load_face_models(load_pack(pack, cache_dir=cache_dir), execution)
    identity = load_identity("hero", [source], models, face_index=0)
    analyzer = FaceAnalyzer(models, batch_size=1)
    renderer = FaceRenderer(models, {"hero": identity}, FaceConfig(enhance=enhance, batch_size=1))
    info = probe(clip)
    n = min(frames, info.frame_count)
    cpu = time.process_time

    with av.open(clip) as container:
        stream = container.streams.video[0]
        stream.thread_type = "NONE"
        t0 = cpu()
        rgbs, pts = [], []
        for f in container.decode(stream):
            rgbs.append(f.to_ndarray(format="rgb24"))
            pts.append(int(f.pts))
            if len(rgbs) == n:
                break
        decode = (cpu() - t0) / n

    # One warm-up call so that first-run allocations do not count.
    analyzer.analyze(rgbs[:1], embed=True)
    t0 = cpu()
    found = [analyzer.analyze([rgb], embed=False)[0] for rgb in rgbs]
    detect = (cpu() - t0) / n
    t0 = cpu()
    for rgb in rgbs:
        analyzer.analyze([rgb], embed=True)
    recognize = max(0.0, (cpu() - t0) / n - detect)
    faces_per_frame = sum(len(f) for f in found) / n

    tasks = [[FaceTask(-1, "hero", f.box, f.landmarks) for f in faces] for faces in found]
    renderer.render(rgbs[:1], tasks[:1])
    before = dict(renderer.stage_seconds)
    t0 = cpu()
    outs = [renderer.render([rgb], [t])[0] for rgb, t in zip(rgbs, tasks, strict=True)]
    render_cpu = (cpu() - t0) / n
    wall = {k: renderer.stage_seconds[k] - before.get(k, 0.0) for k in renderer.stage_seconds}
    wall_total = sum(wall.values()) or 1.0
    # Split the render's CPU time by each stage's share of its wall time (single-threaded: ~equal).
    split = {k: render_cpu * v / wall_total for k, v in wall.items()}

    choice = choose_encoder(_encode_settings(), info)
    with tempfile.TemporaryDirectory(prefix="bench-ceiling-") as tmp:
        chunk = Chunk(0, 0, n, pts[0], pts[n - 1] + 1)
        t0 = cpu()
        with SegmentWriter(os.path.join(tmp, "seg.mp4"), info, choice, chunk) as writer:
            for i, out in enumerate(outs):
                writer.write(Frame(index=i, pts=pts[i], rgb=out))
        encode = (cpu() - t0) / n

    per_frame = {
        "decode": decode,
        "detect": detect,
        "recognize": recognize,
        "align": split.get("align", 0.0),
        "swap": split.get("swap", 0.0),
        "enhance": split.get("enhance", 0.0),
        "paste": split.get("paste", 0.0),
        "encode": encode,
    }
    total = sum(per_frame.values())
    cores = os.cpu_count() or 1
    return {
        "frames": n,
        "winograd": winograd,
        "faces_per_frame": faces_per_frame,
        "cpu_seconds_per_frame": {k: round(v, 5) for k, v in per_frame.items()},
        "total_cpu_seconds_per_frame": round(total, 5),
        "cores": cores,
        "limit_fps": cores / total if total > 0 else 0.0,
    }


def scrfd_cost(cache_dir: str, folder: str, clip: str) -> float | None:
    """CPU-s per frame of the SCRFD-sized stand-in detector (one thread), for the record."""
    from pipeline.models.pack import ModelEntry
    from pipeline.models.runtime import make_runner
    from pipeline.models.runtime.settings import ExecutionConfig
    from pipeline.models.scrfd import ScrfdDetector
    from tests.standins import CONTRACTS

    path = os.path.join(folder, "models", "det_10g.onnx")
    if not os.path.exists(path):
        return None
    import av

    with av.open(clip) as container:
        rgb = next(container.decode(video=0)).to_ndarray(format="rgb24")
    entry = ModelEntry(
        role="detector", kind="scrfd", file="det_10g.onnx", sha256="0" * 64, contract=CONTRACTS["detector"]
    )
    det = ScrfdDetector(make_runner(path, ExecutionConfig(intra_op_threads=1)), entry)
    det.detect(rgb)
    t0 = time.process_time()
    for _ in range(3):
        det.detect(rgb)
    return (time.process_time() - t0) / 3


# ------------------------------------------------------------------------------------ scenarios
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
) -> dict:
    """Naive loop, Recast 1 actor x all cores, Recast one actor per core, on one clip.

    ``direct_row``: also Recast one actor per core with ONNX Runtime's own
    convolutions (``recast_<N>_direct``), which says how much of the speed-up is
    the Winograd rewrite and how much the pipeline.
    """
    cores = settings.cores
    out_dir = os.path.join(os.path.abspath(settings.out), "runs", _slug(label))
    os.makedirs(out_dir, exist_ok=True)
    logger.info("[%s] naive loop", label)
    naive = run_naive(clip, out_dir, pack, source, enhance, cache_dir)
    runs: dict[str, dict] = {"naive": naive}
    plan = [("recast_1", 1, cores, True), (f"recast_{cores}", cores, 1, True)]
    if direct_row:
        plan.append((f"recast_{cores}_direct", cores, 1, False))
    for name, actors, cpus, winograd in plan:
        if name in runs:
            continue
        logger.info("[%s] %s: %d actor(s) x %d cpu", label, name, actors, cpus)
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
    }


def scaling_scenario(
    settings: Settings, *, sets: list[tuple[str, str]], source: str, cache_dir: str, local_ray: bool
) -> dict:
    """Issue 5: one 4-chunk shot on 1 actor and on one actor per core, every actor 1 CPU.

    The per-actor resources are held equal (each actor reserves 1 CPU and runs 1
    intra-op thread and 1 codec thread per stage), so the ratio says how well the
    chunks of one shot spread over actors (a shot rendered as one chain would give
    1.0).  The comparisons' ``actors_time_ratio`` is the other question: 1 actor
    given every core against the same cores split between actors.
    """
    cores = settings.cores
    out = os.path.abspath(settings.out)
    result: dict[str, Any] = {"chunks": 4, "cpus_per_actor": 1, "size": settings.sizes[0], "sets": {}}
    for set_name, pack in sets:
        if set_name == "default":
            fps, chunk_seconds = settings.fps, settings.scaling_chunk_seconds
        else:
            fps, chunk_seconds = settings.scaling_production_fps, 1.0
        clip = make_clip(os.path.join(out, "clips"), settings.sizes[0], 4 * chunk_seconds, fps)
        runs: dict[str, dict] = {}
        for actors in sorted({1, cores}):
            label = f"scaling {set_name} {actors}"
            logger.info("[%s] %d actor(s) x 1 cpu", label, actors)
            spec = recast_spec(
                label,
                clip,
                os.path.join(out, "runs", _slug(label)),
                pack,
                source,
                actors=actors,
                cpus_per_actor=1,
                chunk_seconds=chunk_seconds,
                enhance=False,
                cache_dir=cache_dir,
            )
            run = run_recast(spec, local_ray=local_ray)
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


def memory_scenario(settings: Settings, source: str, cache_dir: str, local_ray: bool) -> dict:
    """Peak actor RSS for a 60 s and a 5-minute shot (default pack, 320x180, low frame rate)."""
    clips = os.path.join(os.path.abspath(settings.out), "clips")
    result: dict[str, Any] = {"fps": settings.memory_fps, "size": "320x180", "shots": {}}
    for seconds in (60.0, 300.0):
        clip = make_clip(clips, "320x180", seconds, settings.memory_fps)
        spec = recast_spec(
            f"memory-{int(seconds)}s",
            clip,
            os.path.join(os.path.abspath(settings.out), "runs", f"memory_{int(seconds)}s"),
            "builtin:default",
            source,
            actors=1,
            cpus_per_actor=settings.cores,
            chunk_seconds=20.0,
            enhance=False,
            cache_dir=cache_dir,
        )
        run = run_recast(spec, local_ray=local_ray)
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


def demo_scenario(settings: Settings, local_ray: bool) -> dict:
    """The demo job (``jobs.demo``'s spec and clip) with 1 actor and with one actor per core."""
    from jobs.demo import demo_spec, write_demo_inputs

    out_dir = os.path.join(os.path.abspath(settings.out), "demo")
    plate, source = write_demo_inputs(out_dir, seconds=settings.demo_seconds, width=640, height=360, fps=24)
    result: dict[str, Any] = {"seconds": settings.demo_seconds, "runs": {}}
    for actors in sorted({1, settings.cores}):
        spec = demo_spec(out_dir, plate, source, actors=actors, cpus=settings.cores)
        spec["job_id"] = f"bench-demo-{actors}"
        spec["output"]["url"] = os.path.join(out_dir, f"a{actors}", "{shot}.mp4")
        run = run_recast(spec, local_ray=local_ray)
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


# ------------------------------------------------------------------------------------ report
def _verdict(value: float | None, target: float, *, at_most: bool = False) -> str:
    """PASS / MISS against ``target``; n/a when not measured."""
    if value is None:
        return "n/a"
    ok = value <= target if at_most else value >= target
    return "PASS" if ok else "MISS"


def targets(results: dict, cores: int) -> list[dict]:
    """Issue 7 item 5 (production set), issue 5 (4-chunk ratio): target beside measured value."""
    rows = []
    for comp in results["comparisons"]:
        many = comp["runs"][f"recast_{cores}"]
        ceiling = comp.get("ceiling", {})
        if comp["set"] == "production" and not comp["enhance"]:
            rows.append(
                {
                    "what": f"{comp['label']}: speed-up, {cores} actors vs naive",
                    "target": ">= 1.5",
                    "value": many["speedup"],
                    "verdict": _verdict(many["speedup"], TARGETS["speedup_2_actors"]),
                }
            )
            direct = comp["runs"].get(f"recast_{cores}_direct")
            if direct:
                rows.append(
                    {
                        "what": f"{comp['label']}: (ablation) speed-up without the Winograd rewrite",
                        "target": "-",
                        "value": direct["speedup"],
                        "verdict": "info",
                    }
                )
            rows.append(
                {
                    "what": f"{comp['label']}: efficiency (fps / machine limit)",
                    "target": ">= 0.85",
                    "value": ceiling.get("efficiency"),
                    "verdict": _verdict(ceiling.get("efficiency"), TARGETS["efficiency"]),
                }
            )
            rows.append(
                {
                    "what": f"{comp['label']}: model busy share, {cores} actors",
                    "target": ">= 0.85",
                    "value": many["model_busy_share"],
                    "verdict": _verdict(many["model_busy_share"], TARGETS["model_busy_share"]),
                }
            )
    scaling = results.get("scaling")
    if scaling and "error" not in scaling:
        for set_name, case in scaling["sets"].items():
            rows.append(
                {
                    "what": f"4-chunk shot ({set_name} set), time {cores} actors / 1 actor, 1 CPU each",
                    "target": "<= 0.65",
                    "value": case["time_ratio"],
                    "verdict": _verdict(case["time_ratio"], TARGETS["four_chunk_ratio"], at_most=True),
                }
            )
    memory = results.get("memory")
    if memory and "error" not in memory:
        rows.append(
            {
                "what": "peak actor memory, 5-min vs 60 s shot",
                "target": "growth <= 10 %",
                "value": memory["growth"],
                "verdict": _verdict(memory["growth"], TARGETS["memory_flat"], at_most=True),
            }
        )
    return rows


def _f(value: Any, fmt: str = "{:.2f}") -> str:
    return "-" if value is None else fmt.format(value)


def table(results: dict) -> str:
    """The human-readable report."""
    cores = results["machine"]["cores"]
    machine, cfg = results["machine"], results["settings"]
    lines = [
        (
            f"Recast benchmark  {machine['when']}  cores={cores}  load before/after: "
            f"{machine['load_before']} / {machine.get('load_after', '-')}"
        ),
        (
            f"clips: astronaut pan/zoom, {cfg['fps']} fps; default set {cfg['default_seconds']:g} s, "
            f"production set {cfg['production_seconds']:g} s (production-cost swapper ~1.5 CPU-s per face, 0.7 with Winograd; "
            "--seconds / --production-seconds override). Encoder libx264 veryfast crf 18 for every runner."
        ),
        (
            "fps = frames / seconds of the frame work (naive: its loop; Recast: first dispatch to published"
            " output, warm actors); job_fps includes actor start-up and model loading."
        ),
        "",
        (
            f"{'case':<26} {'runner':<16} {'act':>3} {'chunks':>6} {'frames':>6} {'fps':>7} {'x naive':>7} "
            f"{'busy':>5} {'job_fps':>7} {'peak MB/actor':>15} {'merge MB/s':>10}"
        ),
    ]
    for comp in results["comparisons"]:
        for name, run in comp["runs"].items():
            peaks = ",".join(f"{p:.0f}" for p in run.get("peak_rss_mb") or []) or "-"
            lines.append(
                f"{comp['label']:<26} {name:<16} {run['actors']:>3} {run.get('chunks', 1):>6} {run['frames']:>6} "
                f"{run['fps']:>7.2f} {_f(run.get('speedup')):>7} {run['model_busy_share']:>5.2f} "
                f"{_f(run.get('job_fps')):>7} {peaks:>15} {_f(run.get('merge_mb_per_s'), '{:.0f}'):>10}"
            )
    lines += ["", "seconds per stage (Recast: actor-seconds summed over chunks; decode counts both passes)"]
    lines.append(f"{'case':<26} {'runner':<16} " + " ".join(f"{c:>12}" for c in STAGE_COLUMNS))
    for comp in results["comparisons"]:
        for name, run in comp["runs"].items():
            st = run["stage_seconds"]
            lines.append(
                f"{comp['label']:<26} {name:<16} "
                + " ".join(f"{st[c]:>12.2f}" if c in st else f"{'-':>12}" for c in STAGE_COLUMNS)
            )
    lines += [
        "",
        "ceiling: CPU-seconds per frame, models on 1 intra-op thread; limit = cores / total",
        (
            "(Recast's CPU sessions run large 3x3 convolutions as Winograd F(4x4,3x3); 'direct' = ONNX Runtime's"
            " own convolutions, as the naive loop runs them)"
        ),
    ]
    for comp in results["comparisons"]:
        c = comp.get("ceiling")
        if not c:
            continue
        per = " ".join(f"{k}={v:.3f}" for k, v in c["cpu_seconds_per_frame"].items())
        lines.append(
            f"{comp['label']:<26} {per}  total={c['total_cpu_seconds_per_frame']:.3f}  limit={c['limit_fps']:.2f} fps  "
            f"achieved={c['achieved_fps']:.2f} ({cores} actors)  efficiency={_f(c.get('efficiency'))}  "
            f"naive efficiency={_f(c.get('naive_efficiency'))}  "
            f"speed-up bound (limit / naive fps)={_f(c.get('max_speedup_over_naive'))}"
        )
        d = c.get("direct")
        if d:
            per = " ".join(f"{k}={v:.3f}" for k, v in d["cpu_seconds_per_frame"].items())
            lines.append(
                f"{'  direct':<26} {per}  total={d['total_cpu_seconds_per_frame']:.3f}  "
                f"limit={d['limit_fps']:.2f} fps  achieved={_f(d.get('achieved_fps'))} ({cores} actors, direct)  "
                f"efficiency={_f(d.get('efficiency'))}"
            )
    if results.get("scrfd_cpu_seconds_per_frame") is not None:
        lines.append(
            f"(SCRFD-sized stand-in detector, not used for detection: {results['scrfd_cpu_seconds_per_frame']:.3f} CPU-s/frame)"
        )
    for key in ("scaling", "memory", "demo"):
        if (results.get(key) or {}).get("error"):
            lines += ["", f"{key} scenario FAILED: {results[key]['error']}"]
    if results.get("scaling") and "error" not in results["scaling"]:
        sc = results["scaling"]
        lines += ["", f"4-chunk shot ({sc['size']}), every actor 1 CPU (issue 5):"]
        for set_name, case in sc["sets"].items():
            runs = "  ".join(
                f"{k} actor(s) {r['seconds']:.2f} s ({r['frames']} frames, {r['fps']:.2f} fps, busy {r['model_busy_share']:.2f})"
                for k, r in case["runs"].items()
            )
            lines.append(f"  {set_name:<10} {case['fps']} fps, {case['chunk_seconds']:g} s chunks: {runs}")
            lines.append(f"  {'':<10} time ratio {_f(case['time_ratio'], '{:.3f}')}")
    for comp in results["comparisons"]:
        if comp.get("actors_time_ratio") is not None:
            lines.append(
                f"  (for comparison, {comp['label']}: {cores} actors x 1 CPU / 1 actor x {cores} CPUs "
                f"= {comp['actors_time_ratio']:.3f})"
            )
    if results.get("memory") and "error" not in results["memory"]:
        m = results["memory"]
        lines += ["", f"memory flatness ({m['size']}, {m['fps']} fps, default pack, 1 actor):"]
        for key, shot in m["shots"].items():
            lines.append(
                f"  {key:>5}: {shot['frames']} frames, {shot['chunks']} chunks, peak RSS {shot['peak_rss_mb']} MB"
            )
        lines.append(f"  growth {_f(m['growth'], '{:+.1%}')}")
    if results.get("demo") and "error" not in results["demo"]:
        d = results["demo"]
        lines += ["", f"demo job (640x360, {d['seconds']:g} s, default pack):"]
        for key, run in d["runs"].items():
            lines.append(
                f"  {key} actor(s): {run['frames']} frames, {run['chunks']} chunks, {run['fps']:.2f} fps "
                f"(job {run['job_fps']:.2f} fps incl. start-up), first chunk done {_f(run['first_chunk_seconds'])} s after submit"
            )
    lines += ["", "targets (issue 7 item 5 on this machine; issue 5's 4-chunk figure):"]
    for row in results["targets"]:
        lines.append(
            f"  {row['verdict']:<5} {row['what']:<62} target {row['target']:<14} measured {_f(row['value'], '{:.3f}')}"
        )
    if results["settings"]["tiny"]:
        lines.append("  (--tiny: test scale with tiny stand-ins; these figures mean nothing)")
    return "\n".join(lines)


def _load() -> str:
    try:
        return subprocess.run(
            ["uptime"], check=False, capture_output=True, text=True, timeout=5
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "-"


# ------------------------------------------------------------------------------------ main
def run_benchmark(settings: Settings) -> dict:
    """Everything the settings ask for; returns the ``bench.json`` content."""
    import ray

    out = os.path.abspath(settings.out)
    os.makedirs(out, exist_ok=True)
    clips = os.path.join(out, "clips")
    cache_dir = os.path.join(out, "cache")
    source = write_source_image(os.path.join(out, "source.jpg"))
    started = time.perf_counter()
    results: dict[str, Any] = {
        "machine": {
            "cores": settings.cores,
            "when": time.strftime("%Y-%m-%d %H:%M:%S"),
            "load_before": _load(),
        },
        "settings": {k: getattr(settings, k) for k in Settings.__dataclass_fields__},
        "comparisons": [],
    }
    prod_pack = production_pack(out, cache_dir, tiny=settings.tiny)
    sets = [
        ("default", "builtin:default", settings.default_seconds, settings.default_chunk_seconds),
        ("production", prod_pack, settings.production_seconds, settings.production_chunk_seconds),
    ]
    cases = []
    for set_name, pack, seconds, chunk in sets if settings.compare else []:
        for size in settings.sizes:
            cases.append((set_name, pack, size, seconds, chunk, False))
    if settings.enhance_row and settings.compare:
        cases.append(
            (
                "production",
                prod_pack,
                settings.sizes[0],
                settings.production_seconds,
                settings.production_chunk_seconds,
                True,
            )
        )

    # Ceilings first, before Ray starts, so nothing else of ours competes for the CPUs.
    ceilings: dict[tuple, dict] = {}
    for set_name, pack, size, seconds, _chunk, enhance in cases:
        clip = make_clip(clips, size, seconds, settings.fps)
        key = (set_name, size, enhance)
        logger.info("ceiling %s %s enhance=%s", set_name, size, enhance)
        measure = functools.partial(
            measure_ceiling,
            clip,
            pack,
            source,
            frames=settings.ceiling_frames,
            enhance=enhance,
            cache_dir=cache_dir,
        )
        ceilings[key] = measure()
        if set_name == "production":
            # What the naive loop's models cost: ONNX Runtime's own convolutions.
            ceilings[key]["direct"] = measure(winograd=False)
    if not settings.tiny and settings.compare:
        results["scrfd_cpu_seconds_per_frame"] = scrfd_cost(
            cache_dir, out, make_clip(clips, settings.sizes[0], settings.production_seconds, settings.fps)
        )

    local_ray = not os.environ.get("RAY_ADDRESS")
    started_ray = not ray.is_initialized()
    if started_ray:
        if local_ray:
            # address="local": never join another Ray instance running on this machine.
            ray.init(
                address="local",
                num_cpus=settings.cores,
                include_dashboard=False,
                logging_level=logging.WARNING,
            )
        else:
            ray.init(logging_level=logging.WARNING)
    try:
        for set_name, pack, size, seconds, chunk, enhance in cases:
            label = f"{set_name} {size}{' +enhance' if enhance else ''}"
            comp = compare(
                settings,
                label=label,
                clip=make_clip(clips, size, seconds, settings.fps),
                pack=pack,
                source=source,
                enhance=enhance,
                chunk_seconds=chunk,
                cache_dir=cache_dir,
                local_ray=local_ray,
                direct_row=set_name == "production" and not enhance,
            )
            comp["set"] = set_name
            comp["seconds"] = seconds
            comp["ceiling"] = dict(ceilings[(set_name, size, enhance)])
            results["comparisons"].append(comp)
            _checkpoint(results, out)
        # The optional scenarios must not cost the comparisons already measured.
        scenarios: list[tuple[str, bool, Callable[[], dict]]] = [
            (
                "scaling",
                settings.scaling and settings.cores > 1,
                lambda: scaling_scenario(
                    settings,
                    sets=[(name, pack) for name, pack, *_ in sets],
                    source=source,
                    cache_dir=cache_dir,
                    local_ray=local_ray,
                ),
            ),
            ("memory", settings.memory, lambda: memory_scenario(settings, source, cache_dir, local_ray)),
            ("demo", settings.demo, lambda: demo_scenario(settings, local_ray)),
        ]
        for key, wanted, scenario in scenarios:
            if not wanted:
                continue
            try:
                results[key] = scenario()
            except Exception as exc:
                logger.exception("%s scenario failed", key)
                results[key] = {"error": f"{type(exc).__name__}: {exc}"}
            _checkpoint(results, out)
    finally:
        if started_ray:
            ray.shutdown()
    results["machine"]["load_after"] = _load()
    results["wall_seconds"] = time.perf_counter() - started
    return derive(results)


def _checkpoint(results: dict, out: str) -> None:
    """Write what is measured so far (``bench.partial.json``): a late failure keeps it."""
    with open(os.path.join(out, "bench.partial.json"), "w") as fh:
        json.dump(results, fh, indent=2, default=str)


def derive(results: dict) -> dict:
    """Fill in the figures computed from measured ones: efficiencies, bounds, targets."""
    cores = results["machine"]["cores"]
    for comp in results["comparisons"]:
        ceiling = comp.get("ceiling")
        if not ceiling:
            continue
        limit = ceiling["limit_fps"]
        achieved = comp["runs"][f"recast_{cores}"]["fps"]
        naive_fps = comp["runs"]["naive"]["fps"]
        ceiling["achieved_fps"] = achieved
        ceiling["efficiency"] = achieved / limit if limit else None
        # The naive loop runs the models with direct convolutions: its own ceiling when measured.
        direct = ceiling.get("direct")
        naive_limit = direct["limit_fps"] if direct else limit
        ceiling["naive_efficiency"] = naive_fps / naive_limit if naive_limit else None
        # No runner can beat the machine limit, so the speed-up over the naive loop is
        # bounded by how far the naive loop is from Recast's limit.
        ceiling["max_speedup_over_naive"] = limit / naive_fps if naive_fps else None
        direct_run = comp["runs"].get(f"recast_{cores}_direct")
        if direct and direct_run:
            direct["achieved_fps"] = direct_run["fps"]
            direct["efficiency"] = direct_run["fps"] / direct["limit_fps"] if direct["limit_fps"] else None
    results["targets"] = targets(results, cores)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Recast against the naive face-swap loop.")
    parser.add_argument("--out", default="out/bench")
    parser.add_argument("--quick", action="store_true", help="720p only, shorter clips, no enhance row")
    parser.add_argument("--tiny", action="store_true", help="test scale: small frames, tiny stand-in models")
    parser.add_argument("--seconds", type=float, default=None, help="default-pack clip length (6)")
    parser.add_argument(
        "--production-seconds", type=float, default=None, help="production-set clip length (4; --quick 2)"
    )
    parser.add_argument("--sizes", default=None, help="comma list: 720p,1080p or WxH")
    parser.add_argument("--no-enhance", action="store_true", help="skip the swap + enhance row")
    parser.add_argument("--memory", action="store_true", help="also the 60 s vs 5-minute memory scenario")
    parser.add_argument("--memory-fps", type=int, default=4)
    parser.add_argument(
        "--scaling",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="the 4-chunk shot on 1 and N actors, issue 5 (default: with the comparisons)",
    )
    parser.add_argument("--demo", action="store_true", help="also the demo job with 1 and N actors")
    parser.add_argument("--demo-seconds", type=float, default=20.0)
    parser.add_argument(
        "--no-compare",
        action="store_true",
        help="skip the comparisons (run only --memory / --demo / --scaling)",
    )
    parser.add_argument("--report", metavar="BENCH_JSON", help="only re-render the table of a bench.json")
    args = parser.parse_args(argv)
    if args.report:
        with open(args.report) as fh:
            results = derive(json.load(fh))
        _write_outputs(results, os.path.dirname(os.path.abspath(args.report)))
        return 0
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

    fields: dict[str, Any] = {
        "out": args.out,
        "memory": args.memory,
        "memory_fps": args.memory_fps,
        "demo": args.demo,
        "demo_seconds": args.demo_seconds,
    }
    if args.quick:
        fields.update(
            sizes=("720p",),
            default_seconds=4.0,
            production_seconds=2.0,
            production_chunk_seconds=1.0,
            default_chunk_seconds=1.0,
            enhance_row=False,
            ceiling_frames=2,
        )
    if args.tiny:
        fields.update(
            sizes=("320x180",),
            default_seconds=2.0,
            production_seconds=2.0,
            default_chunk_seconds=1.0,
            production_chunk_seconds=1.0,
            enhance_row=False,
            ceiling_frames=1,
            scaling_chunk_seconds=1.0,
            tiny=True,
        )
    if args.seconds is not None:
        fields["default_seconds"] = args.seconds
        fields["default_chunk_seconds"] = max(1.0, min(30.0, args.seconds / 4))
    if args.production_seconds is not None:
        fields["production_seconds"] = args.production_seconds
        fields["production_chunk_seconds"] = max(1.0, min(30.0, args.production_seconds / 2))
    if args.sizes:
        fields["sizes"] = tuple(s.strip() for s in args.sizes.split(",") if s.strip())
    if args.no_enhance:
        fields["enhance_row"] = False
    if args.no_compare:
        fields["compare"] = False
    fields["scaling"] = not args.no_compare if args.scaling is None else args.scaling
    settings = Settings(**fields)

    _write_outputs(run_benchmark(settings), os.path.abspath(settings.out))
    return 0


def _write_outputs(results: dict, out: str) -> None:
    with open(os.path.join(out, "bench.json"), "w") as fh:
        json.dump(results, fh, indent=2, default=str)
    text = table(results)
    with open(os.path.join(out, "bench.txt"), "w") as fh:
        fh.write(text + "\n")
    sys.stdout.write(text + "\n")


if __name__ == "__main__":
    raise SystemExit(main())
