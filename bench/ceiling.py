"""The machine's ceiling for one clip: each stage's CPU-seconds per frame, models single-threaded.

With every core busy and nothing waiting, a runner cannot go faster than
``cores / total CPU-seconds per frame`` (the limit); a runner's efficiency is its
fps over that limit.  Measured on a few frames, before Ray starts, so nothing
else of the benchmark competes for the CPUs.
"""

from __future__ import annotations

import os
import tempfile
import time

import av
import numpy as np

from bench.models.standins import CONTRACTS
from bench.runs import encode_settings
from pipeline.faces.analyze import FaceAnalyzer
from pipeline.faces.config import FaceConfig
from pipeline.faces.identity import load_identity
from pipeline.faces.renderers.cpu import FaceRenderer
from pipeline.geometry.types import FaceTask
from pipeline.models.detectors.scrfd import ScrfdDetector
from pipeline.models.loader import load_face_models
from pipeline.models.pack import ModelEntry, load_pack
from pipeline.models.runtime import make_runner
from pipeline.models.runtime.settings import ExecutionConfig
from pipeline.video.chunking import Chunk
from pipeline.video.decode import Frame
from pipeline.video.encode import SegmentWriter, choose_encoder
from pipeline.video.probe import probe


def measure_ceiling(
    clip: str, pack: str, source: str, *, frames: int, enhance: bool, cache_dir: str, winograd: bool = True
) -> dict:
    """CPU-seconds per frame of each stage, models on one intra-op thread, on ``frames`` frames.

    ``winograd``: Recast's CPU sessions (large 3x3 convolutions as Winograd F(4x4, 3x3));
    False: ONNX Runtime's direct convolutions, as the naive loop runs the models.
    """
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
        rgbs: list[np.ndarray] = []
        pts: list[int] = []
        for f in container.decode(stream):
            if f.pts is None:
                raise ValueError(f"{clip}: frame {len(rgbs)} has no timestamp")
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

    choice = choose_encoder(encode_settings(), info)
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


def scrfd_cost(folder: str, clip: str) -> float | None:
    """CPU-s per frame of the SCRFD-sized stand-in detector (one thread), for the record.

    The production-cost pack detects with YuNet (the stand-in fires on bright cells,
    not faces), so the SCRFD-sized cost is reported beside the table instead.
    """
    path = os.path.join(folder, "models", "det_10g.onnx")
    if not os.path.exists(path):
        return None
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
