"""The analysis pass against the cost of its parts: is the actor as fast as its models?

For one clip and one model pack, in-process (no Ray), everything on one intra-op
thread and one codec thread as a one-CPU actor runs:

* the actor's own analysis (:meth:`actors.render.RenderWorker.analyze_chunk`, the
  whole clip as one chunk) with ``faces.embed`` = ``every_frame`` and ``track``:
  its wall seconds (the actor is busy that long), the breakdown it reports
  (``analysis.decode`` ... ``analysis.bookkeeping``), faces found and embedded;
* the parts alone on the same frames: decode (``decode_range``, RGB frames),
  the detector (``detect_batch`` on batches of the actor's size) and the
  recognizer (``embed_aligned`` on the faces' aligned crops, all of them);
* ``ratio`` = actor seconds / (decode + detector + recognizer alone), with the
  recognizer's share scaled to the faces the mode embeds.  Target: <= 1.2;
* ``reuse``: the chunk's render from the pictures the ``track`` analysis kept, against
  decoding it again (:mod:`bench.analysis_pass.decode_reuse`): decode calls per frame, seconds, fps.
* ``detect_size``: the pack's detector on 4K frames of a large face at its full input
  and at the smaller one ``faces.detect_size: auto`` chooses (:mod:`bench.analysis_pass.detect_size`).

    python -m bench.analysis_pass.analysis CLIP [--pack builtin:default] [--frames 48]
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import numpy as np

from actors.render import RenderConfig, RenderWorker
from bench.analysis_pass.decode_reuse import measure_render_reuse, reuse_lines
from bench.analysis_pass.detect_size import detect_size_lines, measure_detect_size
from pipeline.faces.analyze import to_uint8
from pipeline.faces.config import FaceConfig
from pipeline.geometry.align import warp_crops
from pipeline.models.runtime.settings import ExecutionConfig
from pipeline.video.chunking import Chunk
from pipeline.video.decode import decode_range
from pipeline.video.probe import probe

PARTS = ("decode", "letterbox", "detector", "postprocess", "align", "recognizer", "bookkeeping")
MODES = ("every_frame", "track")


def measure_analysis(
    clip: str, pack: str, *, cache_dir: str | None = None, frames: int | None = None, batch_size: int = 8
) -> dict[str, Any]:
    """The figures above for ``clip`` (its first ``frames`` frames; None: all)."""
    info = probe(clip)
    n = info.frame_count if frames is None else min(frames, info.frame_count)
    end_pts = info.pts[n] if n < info.frame_count else info.end_pts()
    chunk = Chunk(0, 0, n, info.pts[0], end_pts)
    execution = ExecutionConfig(intra_op_threads=1)
    row: dict[str, Any] = {"clip": clip, "pack": pack, "frames": n, "size": f"{info.width}x{info.height}"}
    workers = {}
    for mode in MODES:
        config = RenderConfig(
            pack_url=pack,
            pack_cache_dir=cache_dir,
            execution=execution,
            codec_threads=1,
            faces=FaceConfig(batch_size=batch_size, embed=mode),
        )
        worker = RenderWorker(config, f"analysis-{mode}")
        if worker.setup_error is not None:
            raise worker.setup_error
        worker.analyze_chunk(clip, info, Chunk(0, 0, 1, info.pts[0], info.pts[1]))  # warm-up
        started = time.perf_counter()
        analysis = worker.analyze_chunk(clip, info, chunk)
        seconds = time.perf_counter() - started
        stages = analysis.stage_seconds
        row[mode] = {
            "actor_seconds": round(seconds, 4),
            "breakdown": {p: round(stages.get(f"analysis.{p}", 0.0), 4) for p in PARTS},
            "faces": analysis.face_count,
            "embedded": analysis.faces_embedded,
            "recognizer_calls_per_frame": round(analysis.faces_embedded / max(1, n), 3),
        }
        workers[mode] = worker
        if mode == "track":
            row["reuse"] = measure_render_reuse(worker, clip, info, chunk, seconds)
    row["alone"] = _parts_alone(workers["every_frame"].models, clip, info, chunk, batch_size)
    row["detect_size"] = measure_detect_size(workers["every_frame"].models, batch_size=batch_size)
    alone = row["alone"]
    for mode in MODES:
        faces = max(1, row[mode]["faces"])
        recognizer = alone["recognizer"] * row[mode]["embedded"] / faces
        parts = alone["decode"] + alone["detector"] + recognizer
        row[mode]["parts_seconds"] = round(parts, 4)
        row[mode]["ratio"] = round(row[mode]["actor_seconds"] / parts, 3) if parts > 0 else None
    every, track = row["every_frame"], row["track"]
    row["recognizer_calls_saved"] = every["embedded"] - track["embedded"]
    return row


def _parts_alone(models: Any, clip: str, info: Any, chunk: Chunk, batch_size: int) -> dict[str, float]:
    """Seconds of decode, detector and recognizer, each alone on the chunk's frames."""
    started = time.perf_counter()
    rgbs = [f.rgb for f in decode_range(clip, info, chunk.start_frame, chunk.end_frame, threads=1)]
    decode = time.perf_counter() - started
    views = [to_uint8(f) for f in rgbs]
    started = time.perf_counter()
    found = []
    for b in range(0, len(views), batch_size):
        found.extend(models.detector.detect_batch(views[b : b + batch_size]))
    detector = time.perf_counter() - started
    recognizer = models.recognizer
    crops = [
        warp_crops(v, [f.landmarks for f in faces], recognizer.crop_size, "arcface")[0]
        for v, faces in zip(views, found)
        if faces
    ]
    started = time.perf_counter()
    if crops:
        recognizer.embed_aligned(np.concatenate(crops))
    embed = time.perf_counter() - started
    return {"decode": round(decode, 4), "detector": round(detector, 4), "recognizer": round(embed, 4)}


def analysis_table(rows: list[dict[str, Any]]) -> str:
    """The rows as text: per mode actor s/frame, breakdown, recognizer calls, ratio to the parts."""
    if not rows:
        return ""
    head = (
        f"{'analysis pass':<28} {'mode':<11} {'ms/frame':>8} {'parts':>7} {'ratio':>6} "
        f"{'rec/fr':>6}  breakdown ms/frame ({', '.join(PARTS)})"
    )
    lines = [head, "-" * len(head)]
    for row in rows:
        if "error" in row:
            lines.append(f"{row.get('label', '?'):<28} error: {row['error']}")
            continue
        n = max(1, row["frames"])
        for mode in MODES:
            m = row[mode]
            parts = " ".join(f"{1000 * m['breakdown'][p] / n:.1f}" for p in PARTS)
            lines.append(
                f"{row.get('label', row['size']):<28} {mode:<11} {1000 * m['actor_seconds'] / n:>8.1f} "
                f"{1000 * m['parts_seconds'] / n:>7.1f} {m['ratio']:>6.2f} "
                f"{m['recognizer_calls_per_frame']:>6.2f}  {parts}"
            )
    lines.extend(reuse_lines(rows))
    lines.append(
        "ratio = analysis actor seconds / (decode + detector + recognizer alone on the same frames, "
        "recognizer scaled to the faces embedded); target <= 1.2"
    )
    more = detect_size_lines(rows)
    return "\n".join(lines + ([""] + more if more else []))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("clip")
    parser.add_argument("--pack", default="builtin:default")
    parser.add_argument("--cache-dir", default=None)
    parser.add_argument("--frames", type=int, default=None)
    parser.add_argument("--json", default=None, help="also write the row here")
    args = parser.parse_args(argv)
    row = measure_analysis(args.clip, args.pack, cache_dir=args.cache_dir, frames=args.frames)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(row, fh, indent=2)
    print(analysis_table([row]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
