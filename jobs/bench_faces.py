"""Per-stage face-processing time per frame at 720p and 1080p (CPU by default).

Frames are insightface's t1.jpg (six people) scaled into a 16:9 canvas, every face is
replaced by the astronaut (``skimage``), detection and recognition both run (the
reference path), with the embedded default pack unless ``--pack`` names another one::

    .venv/bin/python -m jobs.bench_faces --frames 8 --batch 4
    .venv/bin/python -m jobs.bench_faces --sizes 1280x720 --pack s3://studio/packs/buffalo --enhance

Prints one JSON object per size: ms per frame for detect, recognize, align, swap,
enhance, paste, the total, and the share of the total spent in model stages.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import cv2
import numpy as np

MODEL_STAGES = ("detect", "recognize", "swap", "enhance")


def _canvas(image: np.ndarray, width: int, height: int) -> np.ndarray:
    scale = min(width / image.shape[1], height / image.shape[0])
    w, h = int(image.shape[1] * scale), int(image.shape[0] * scale)
    canvas = np.full((height, width, 3), 16, np.uint8)
    x0, y0 = (width - w) // 2, (height - h) // 2
    canvas[y0 : y0 + h, x0 : x0 + w] = cv2.resize(image, (w, h), interpolation=cv2.INTER_AREA)
    return canvas


def bench(
    pack_url: str, sizes: Sequence[tuple[int, int]], frames: int, batch: int, enhance: bool
) -> list[dict]:
    """Run the stages on ``frames`` frames per size; returns one record per size."""
    import importlib.resources

    from skimage.data import astronaut

    from pipeline.faces.analyze import FaceAnalyzer
    from pipeline.faces.config import FaceConfig
    from pipeline.faces.identity import identity_from_images
    from pipeline.faces.renderers.cpu import FaceRenderer
    from pipeline.faces.types import FaceTask
    from pipeline.models.loader import load_face_models
    from pipeline.models.pack import load_pack
    from pipeline.models.runtime.settings import ExecutionConfig

    cache = tempfile.mkdtemp(prefix="bench-faces-") if pack_url == "builtin:default" else None
    pack = load_pack(pack_url, cache_dir=cache)
    models = load_face_models(pack, ExecutionConfig())
    source = identity_from_images("astro", [("astronaut", astronaut())], models)
    group_path = Path(str(importlib.resources.files("insightface") / "data" / "images" / "t1.jpg"))
    group = cv2.cvtColor(cv2.imread(str(group_path)), cv2.COLOR_BGR2RGB)

    records = []
    for width, height in sizes:
        canvas = _canvas(group, width, height)
        clip = [canvas.copy() for _ in range(frames)]
        analyzer = FaceAnalyzer(models, batch_size=batch)
        renderer = FaceRenderer(
            models, {"astro": source}, FaceConfig(enhance=enhance, batch_size=max(batch, 8))
        )

        def run(chunk: list[np.ndarray], analyzer=analyzer, renderer=renderer) -> int:
            faces = analyzer.analyze(chunk, embed=True)
            tasks = [[FaceTask(-1, "astro", f.box, f.landmarks) for f in per] for per in faces]
            renderer.render(chunk, tasks)
            return sum(len(t) for t in tasks)

        run(clip[:batch])  # warm-up: first-call allocations
        for stats in (analyzer.stage_seconds, renderer.stage_seconds):
            for key in stats:
                stats[key] = 0.0
        started, n_faces = time.perf_counter(), 0
        for start in range(0, frames, batch):
            n_faces += run(clip[start : start + batch])
        wall = time.perf_counter() - started
        stages = {**analyzer.stage_seconds, **renderer.stage_seconds}
        ms = {k: round(v * 1000 / frames, 2) for k, v in stages.items()}
        model = sum(stages.get(k, 0.0) for k in MODEL_STAGES)
        records.append(
            {
                "size": f"{width}x{height}",
                "pack": pack.manifest.name,
                "swapper": pack.entry("swapper").kind if pack.entry("swapper") else None,
                "faces_per_frame": n_faces / frames,
                "frames": frames,
                "batch": batch,
                "ms_per_frame": ms,
                "total_ms_per_frame": round(wall * 1000 / frames, 2),
                "model_share": round(model / wall, 3),
                "providers": models.providers,
            }
        )
    return records


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pack", default="builtin:default")
    parser.add_argument("--sizes", nargs="+", default=["1280x720", "1920x1080"])
    parser.add_argument("--frames", type=int, default=8)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--enhance", action="store_true")
    args = parser.parse_args(argv)
    sizes = [tuple(int(v) for v in s.lower().split("x")) for s in args.sizes]
    for record in bench(args.pack, sizes, args.frames, args.batch, args.enhance):  # type: ignore[arg-type]
        print(json.dumps(record))
    return 0


if __name__ == "__main__":
    sys.exit(main())
