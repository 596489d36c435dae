"""GPU benchmark of the device render path: fps per GPU at 1080p.

What it measures, on a generated clip of a real face (``jobs.demo_media``: the astronaut,
panned and zoomed; nothing downloaded):

* **detect**: one analysis pass (the default pack's YuNet on ONNX Runtime CPU, as in
  Recast, where detection is its own pass): fps and faces per frame.  Its face tasks
  feed every render row.
* **device**: :class:`~pipeline.faces.renderers.device.DeviceFaceRenderer` on frames
  already resident on the GPU (``render_tensor``), swap only and swap + enhance, for
  each batch size (``--batches``): the ceiling of the device path.  ``fps`` with
  per-stage synchronisation (stage seconds, model busy share), ``fps_untimed``
  without it (the verdict of a device row is taken on it).
* **decode+device**: at the best batch size, what a render actor runs, end to end from
  the file: the renderer :func:`~pipeline.faces.renderers.make_renderer` chooses
  (the device renderer on CUDA, which uploads and downloads through its pinned host
  buffers), fed by :func:`~pipeline.stages.run_stages` from ``pipeline.video.decode``.
* **decode+device+encode**: the same plus CPU encode (libx264 ``ultrafast``, every
  core, ``pipeline.video.encode.SegmentWriter`` as the writer stage; H200s have no NVENC).

Models: production-cost stand-ins (inswapper_128- and GFPGAN-1.4-sized, same I/O)
converted to torch (onnx2torch) and run in fp16 on CUDA
(``ExecutionConfig(backend="torch", fp16=True)``); ``tiny`` uses the tiny stand-ins.
Every row carries fps, faces/s, model busy share, the GPU, torch and CUDA versions,
peak GPU memory, and the targets (>= 200 fps swap only, >= 60 fps swap + enhance,
1080p, per H200-class GPU) with PASS/MISS ("n/a (no CUDA)" without a GPU, "n/a (not
1080p)" at other sizes).  Writes ``gpu_bench.json`` into ``out`` and
``gpu_bench.partial.json`` after every row, so a timeout keeps what was measured.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from bench.device.gpu_inputs import Settings, analyse, build_pack, identities, load_models, make_clip
from pipeline.geometry.types import FaceTask
from pipeline.models.loader import FaceModels

logger = logging.getLogger(__name__)

TARGET_FPS = {"swap": 200.0, "swap+enhance": 60.0}
"""Per H200-class GPU at 1080p."""
TARGET_SIZE = "1080p"
QUEUE_BATCHES = 2
"""Batches in flight between the stages: the actor's default (``RenderConfig.queue_batches``)."""


def _sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def _gpu_info() -> dict[str, Any]:
    cuda = torch.cuda.is_available()
    return {
        "gpu": torch.cuda.get_device_name() if cuda else None,
        "torch": torch.__version__,
        "cuda": torch.version.cuda if cuda else None,
    }


def _reset_peak() -> None:
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()


def _peak_mb() -> float | None:
    return round(torch.cuda.max_memory_allocated() / 2**20, 1) if torch.cuda.is_available() else None


def verdict(mode: str, fps: float, size: str) -> str:
    """PASS/MISS against the per-GPU target, or why it does not apply."""
    if not torch.cuda.is_available():
        return "n/a (no CUDA)"
    if size != TARGET_SIZE:
        return f"n/a (not {TARGET_SIZE})"
    return "PASS" if fps >= TARGET_FPS[mode] else "MISS"


def _config(mode: str, batch: int) -> Any:
    from pipeline.faces.config import FaceConfig

    return FaceConfig(enhance=mode == "swap+enhance", batch_size=batch)


def _figures(
    stage_seconds: dict[str, float], n: int, tasks: list[list[FaceTask]], wall: float
) -> dict[str, Any]:
    return {
        "frames": n,
        "seconds": wall,
        "fps": n / wall,
        "faces_per_s": sum(len(t) for t in tasks) / wall,
        "stage_seconds": dict(stage_seconds),
        "peak_gpu_mb": _peak_mb(),
    }


def device_row(
    models: FaceModels, frames_gpu: torch.Tensor, tasks: list[list[FaceTask]], mode: str, batch: int
) -> dict[str, Any]:
    """Frames already on the device: render them all in batches, timed and untimed."""
    from pipeline.faces.renderers.device import DeviceFaceRenderer

    n = len(tasks)
    result: dict[str, Any] = {
        "row": f"{mode} device b{batch}",
        "mode": mode,
        "stage": "device",
        "batch": batch,
    }
    for timing in (False, True):
        renderer = DeviceFaceRenderer(models, identities(), _config(mode, batch), timing=timing)
        # warm-up (allocations, kernels; every batch shape the loop below will see)
        for size in {batch, n % batch} - {0}:
            renderer.render_tensor(frames_gpu[:size], tasks[:size])
        _sync()
        renderer.stage_seconds = dict.fromkeys(renderer.stage_seconds, 0.0)
        renderer.model_seconds = 0.0
        _reset_peak()
        started = time.perf_counter()
        for start in range(0, n, batch):
            renderer.render_tensor(frames_gpu[start : start + batch], tasks[start : start + batch])
        _sync()
        wall = time.perf_counter() - started
        if timing:
            result.update(_figures(renderer.stage_seconds, n, tasks, wall))
            result["model_seconds"] = renderer.model_seconds
            result["model_busy_share"] = renderer.model_seconds / wall
        else:
            result["fps_untimed"] = n / wall
    return result


def pipeline_row(
    models: FaceModels,
    clip: str,
    tasks: list[list[FaceTask]],
    mode: str,
    batch: int,
    *,
    encode: bool,
    out: str,
) -> dict[str, Any]:
    """End to end from the file, as a render actor runs a chunk: decode -> render -> (encode).

    The renderer is the one the actor gets (:func:`~pipeline.faces.renderers.make_renderer`),
    called on numpy frames batch by batch by :func:`~pipeline.stages.run_stages`, which
    overlaps decode, render and encode on three threads.  ``model_busy_share`` is the
    share of the wall time the render stage was busy, as the actor reports it.
    """
    from pipeline.faces.renderers import make_renderer
    from pipeline.stages import run_stages
    from pipeline.video.chunking import Chunk
    from pipeline.video.decode import Frame, decode_range
    from pipeline.video.encode import EncodeSettings, SegmentWriter, choose_encoder
    from pipeline.video.probe import probe

    info = probe(clip)
    n = info.frame_count
    renderer = make_renderer(models, identities(), _config(mode, batch))

    def render(frames: list[Frame]) -> list[Frame]:
        outs = renderer.render([f.rgb for f in frames], [tasks[f.index] for f in frames])
        return [Frame(index=f.index, pts=f.pts, rgb=o) for f, o in zip(frames, outs, strict=True)]

    # warm-up on the first batch (kernels, allocator, pinned buffers) before the clock starts
    render(list(decode_range(clip, info, 0, min(batch, n))))
    _sync()
    renderer.stage_seconds = dict.fromkeys(renderer.stage_seconds, 0.0)
    _reset_peak()

    choice = choose_encoder(
        EncodeSettings(codec="h264", preset="ultrafast", quality=18, hardware=False), info
    )
    seg_path = os.path.join(out, f"bench_{mode.replace('+', '_')}_b{batch}.mp4")
    written = 0

    def count(frame: Frame) -> None:
        nonlocal written
        written += 1

    started = time.perf_counter()
    with contextlib.ExitStack() as stack:
        sink: Callable[[Frame], None] = count
        if encode:
            chunk = Chunk(0, 0, n, info.pts[0], info.pts[-1] + 1)
            segment = stack.enter_context(SegmentWriter(seg_path, info, choice, chunk, threads=0))

            def sink(frame: Frame) -> None:
                segment.write(frame)
                count(frame)

        frames = decode_range(clip, info, 0, n)
        times = run_stages(frames, render, sink, batch_size=batch, queue_batches=QUEUE_BATCHES)
    _sync()
    wall = time.perf_counter() - started
    if written != n:
        raise RuntimeError(f"rendered {written} of {n} frames")
    stage = "decode+device+encode" if encode else "decode+device"
    row: dict[str, Any] = {"row": f"{mode} {stage} b{batch}", "mode": mode, "stage": stage, "batch": batch}
    row.update(_figures(renderer.stage_seconds, n, tasks, wall))
    row["render_seconds"] = times.process_seconds
    row["model_busy_share"] = times.process_busy_share
    row["renderer"] = type(renderer).__name__
    if encode:
        row["encoder"] = f"{choice.name} {choice.options.get('preset', '')}".strip()
        row["output_mb"] = round(os.path.getsize(seg_path) / 1e6, 2)
        os.remove(seg_path)
    return row


def _checkpoint(out: str, result: dict[str, Any]) -> None:
    tmp = os.path.join(out, "gpu_bench.partial.json.tmp")
    with open(tmp, "w") as fh:
        json.dump(result, fh, indent=1, default=str)
    os.replace(tmp, os.path.join(out, "gpu_bench.partial.json"))


def table(result: dict[str, Any]) -> str:
    """The rows as a fixed-width text table."""
    head = f"{'row':<40} {'fps':>8} {'untimed':>8} {'faces/s':>8} {'busy':>6} {'peak MB':>8}  target"
    title = (
        f"GPU: {result['gpu'] or 'none (CPU)'}  torch {result['torch']}  CUDA {result['cuda']}  "
        f"size {result['size']}  frames {result['frames']}  models {result['models']}"
    )
    lines = [title, head, "-" * len(head)]
    for r in result["rows"]:
        untimed = f"{r['fps_untimed']:8.1f}" if "fps_untimed" in r else f"{'':>8}"
        busy = f"{r['model_busy_share']:6.2f}" if "model_busy_share" in r else f"{'':>6}"
        faces = f"{r['faces_per_s']:8.1f}" if "faces_per_s" in r else f"{'':>8}"
        peak = f"{r['peak_gpu_mb']:8.0f}" if r.get("peak_gpu_mb") is not None else f"{'':>8}"
        target = ""
        if "mode" in r:
            target = f">= {TARGET_FPS[r['mode']]:.0f} fps: {r['verdict']}"
        elif r["row"] == "detect":
            target = f"faces/frame {r['faces_per_frame']:.2f}"
        lines.append(f"{r['row']:<40} {r['fps']:8.1f} {untimed} {faces} {busy} {peak}  {target}")
    return "\n".join(lines)


def run(settings: Settings) -> dict[str, Any]:
    """Every measurement; returns the result written to ``gpu_bench.json``."""
    os.makedirs(settings.out, exist_ok=True)
    gpu = _gpu_info()
    result: dict[str, Any] = {
        **gpu,
        "size": settings.size,
        "models": "tiny stand-ins" if settings.tiny else "production-cost stand-ins",
        "fp16": settings.fp16 and torch.cuda.is_available(),
        "targets_fps": TARGET_FPS,
        "target_size": TARGET_SIZE,
        "cpu_cores": os.cpu_count(),
        "rows": [],
    }
    if torch.cuda.is_available():
        torch.backends.cudnn.benchmark = settings.cudnn_benchmark
    result["cudnn_benchmark"] = settings.cudnn_benchmark
    started = time.perf_counter()
    models = load_models(build_pack(settings), settings)
    result["providers"] = models.providers
    clip = make_clip(settings)
    result["setup_seconds"] = time.perf_counter() - started
    frames, tasks, detect = analyse(clip, models)
    result["frames"] = len(frames)
    result["rows"].append(detect)
    _checkpoint(settings.out, result)
    if not detect["faces"]:
        raise RuntimeError(f"no face found in {clip}: nothing to render")

    device = models.swapper.device
    if device is None:
        raise RuntimeError("the benchmark's swapper does not run on torch")
    stacked = np.stack(frames)
    frames_gpu = torch.from_numpy(stacked if stacked.dtype == np.uint8 else stacked.astype(np.int32)).to(
        device
    )
    del frames, stacked
    for mode in TARGET_FPS:
        rows = []
        for batch in settings.batches:
            row = device_row(models, frames_gpu, tasks, mode, batch)
            row["verdict"] = verdict(mode, row["fps_untimed"], settings.size)
            row.update(gpu)
            rows.append(row)
            result["rows"].append(row)
            _checkpoint(settings.out, result)
            logger.info("%s: %.1f fps (untimed %.1f)", row["row"], row["fps"], row["fps_untimed"])
        best = max(rows, key=lambda r: r["fps_untimed"])["batch"]
        result.setdefault("best_batch", {})[mode] = best
        for encode in (False, True):
            row = pipeline_row(models, clip, tasks, mode, best, encode=encode, out=settings.out)
            row["verdict"] = verdict(mode, row["fps"], settings.size)
            row.update(gpu)
            result["rows"].append(row)
            _checkpoint(settings.out, result)
            logger.info("%s: %.1f fps", row["row"], row["fps"])
    result["total_seconds"] = time.perf_counter() - started
    with open(os.path.join(settings.out, "gpu_bench.json"), "w") as fh:
        json.dump(result, fh, indent=1, default=str)
    return result
