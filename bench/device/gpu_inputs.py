"""Inputs of the GPU benchmark: its settings, the model pack, the models, the clip and its faces."""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from pipeline.geometry.types import FaceTask, Identity
from pipeline.models.loader import FaceModels

SIZES = {"1080p": (1920, 1080), "720p": (1280, 720), "tiny": (320, 180)}
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


def dims(size: str) -> tuple[int, int]:
    """(width, height) of a named size or of ``WxH``."""
    if size in SIZES:
        return SIZES[size]
    w, h = size.lower().split("x")
    return int(w), int(h)


def build_pack(settings: Settings) -> str:
    """A verified pack folder: the default pack's YuNet plus stand-in recognizer, swapper, enhancer."""
    from bench.models.standins import (
        CONTRACTS,
        PRODUCTION_FILES,
        write_manifest,
        write_model,
        write_production_models,
    )
    from pipeline.models.default_pack import YUNET_CONTRACT, YUNET_FILE
    from pipeline.models.pack import load_pack

    pack_dir = os.path.join(settings.out, "tiny-pack" if settings.tiny else "production-pack")
    if os.path.exists(os.path.join(pack_dir, "manifest.json")):
        return pack_dir
    os.makedirs(pack_dir, exist_ok=True)
    default = load_pack("builtin:default", cache_dir=os.path.join(settings.out, "pack-cache"))
    shutil.copyfile(os.path.join(default.local_dir, YUNET_FILE), os.path.join(pack_dir, YUNET_FILE))
    entries: list[dict[str, Any]] = [
        {"role": "detector", "kind": "yunet", "file": YUNET_FILE, "contract": YUNET_CONTRACT}
    ]
    models_dir = settings.models_dir or os.path.join(settings.out, "models")
    if not settings.tiny:
        write_production_models(models_dir)
    for role in ("recognizer", "swapper", "enhancer"):
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


def load_models(pack_dir: str, settings: Settings) -> FaceModels:
    """Role objects: detector and recognizer on ONNX Runtime CPU; swapper and enhancer on torch.

    Detection is its own pass in a job (``analyze_chunk``), so only the swapper and the
    enhancer run on the device, as ``ExecutionConfig(backend="torch")`` makes them for
    the actor (fp16 on CUDA unless ``--fp32``).
    """
    from pipeline.models.loader import role_class
    from pipeline.models.pack import load_pack
    from pipeline.models.runtime import make_runner
    from pipeline.models.runtime.settings import ExecutionConfig

    pack = load_pack(pack_dir, cache_dir=os.path.join(settings.out, "pack-cache"))
    # the recognizer fills its role but is not measured: no Winograd rewrite to wait for
    cpu = ExecutionConfig(providers=("CPUExecutionProvider",), cpu_winograd=False)
    device = ExecutionConfig(backend="torch", fp16=settings.fp16)
    built: dict[str, Any] = {}
    providers: dict[str, list[str]] = {}
    for role, config in (("detector", cpu), ("recognizer", cpu), ("swapper", device), ("enhancer", device)):
        entry = pack.entry(role)
        assert entry is not None
        runner = make_runner(pack.path(role), config)
        providers[role] = list(runner.providers)
        built[role] = role_class(entry.kind)(runner, entry)
    return FaceModels(
        detector=built["detector"],
        recognizer=built["recognizer"],
        swapper=built["swapper"],
        enhancer=built["enhancer"],
        occluder=None,
        pack=pack,
        providers=providers,
    )


def identities() -> dict[str, Identity]:
    """The source identity, with a fixed 512-d embedding (stand-in models: any unit vector will do)."""
    vector = np.random.default_rng(7).standard_normal(512).astype(np.float32)
    hero = Identity(
        name=IDENTITY,
        embedding=vector / np.linalg.norm(vector),
        source_rgb=np.zeros((8, 8, 3), np.uint8),
        source_landmarks=np.zeros((5, 2), np.float32),
        source_box=np.zeros(4, np.float32),
    )
    return {IDENTITY: hero}


def make_clip(settings: Settings) -> str:
    """The astronaut clip at the benchmark's size and length (written once into ``out``)."""
    from jobs.demo_media import make_face_clip

    width, height = dims(settings.size)
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


def analyse(clip: str, models: FaceModels) -> tuple[list[np.ndarray], list[list[FaceTask]], dict[str, Any]]:
    """Decode every frame, detect faces (one pass), and turn them into face tasks."""
    from pipeline.video.decode import decode_range
    from pipeline.video.probe import probe

    info = probe(clip)
    frames = [f.rgb for f in decode_range(clip, info, 0, info.frame_count)]
    detector = models.detector
    detector.detect_batch(frames[:1])  # warm-up
    started = time.perf_counter()
    found = []
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
