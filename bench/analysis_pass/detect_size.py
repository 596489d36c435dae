"""The detector at its full input against the smaller one ``faces.detect_size: auto`` chooses.

On 4K frames with one large real face (the astronaut, zoomed in: the face about half the
frame high), for a pack's warm detector on the analysis benchmark's one thread: the input
auto mode would choose from the first frame's faces (:func:`pipeline.faces.detectsize.reduced_size`),
then ms per frame of ``detect_batch`` (letterbox + model + decoding) and of the model call
alone, at the full input and at that size, side by side.  The size is chosen from the faces
the embedded pack's YuNet finds (the frames' faces, whatever the pack: the production-cost
stand-ins' random weights find none that are real).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from jobs.demo_media import astronaut_rgb, pan_zoom_frame
from pipeline.faces.detectsize import reduced_size
from pipeline.models.detectors.detector_sizes import input_size
from pipeline.models.loader import load_detector
from pipeline.models.pack import load_pack
from pipeline.models.runtime.settings import ExecutionConfig

FRAME = (3840, 2160)


def large_face_frames(count: int) -> list[np.ndarray]:
    """``count`` 4K frames of the zoomed-in astronaut (RGB uint8)."""
    image = astronaut_rgb()
    return [pan_zoom_frame(image, t, *FRAME) for t in np.linspace(0.0, 0.2, count)]


def _timed(detector: Any, frames: list[np.ndarray], batch_size: int) -> dict[str, float]:
    detector.detect_batch(frames[:1])  # warm: first-call allocations out of the figure
    model_before = dict(getattr(detector, "stage_seconds", {}))
    started = time.perf_counter()
    for b in range(0, len(frames), batch_size):
        detector.detect_batch(frames[b : b + batch_size])
    total = time.perf_counter() - started
    model = getattr(detector, "stage_seconds", {}).get("detector", 0.0) - model_before.get("detector", 0.0)
    n = len(frames)
    return {"ms_per_frame": round(1000 * total / n, 2), "model_ms_per_frame": round(1000 * model / n, 2)}


def measure_detect_size(models: Any, *, frames: int = 4, batch_size: int = 8) -> dict[str, Any]:
    """The figures above for the warm role objects ``models`` (:class:`FaceModels`)."""
    views = large_face_frames(frames)
    detector = models.detector
    base = input_size(detector)
    embedded = load_detector(load_pack("builtin:default"), ExecutionConfig(intra_op_threads=1))
    faces = embedded.detect(views[0])
    size = reduced_size(base, views[0].shape, faces)
    row: dict[str, Any] = {
        "frame": f"{FRAME[0]}x{FRAME[1]}",
        "face_px": round(float(min(min(f.box[2] - f.box[0], f.box[3] - f.box[1]) for f in faces)), 1)
        if faces
        else None,
        "full": f"{base[0]}x{base[1]}",
        "reduced": f"{size[0]}x{size[1]}",
        "at_full": _timed(detector, views, batch_size),
    }
    sizes = models.detector_sizes
    reduced = sizes.at(size, views[0]) if sizes is not None and size != base else None
    if reduced is None:
        row["note"] = (sizes.refused if sizes is not None else None) or "no smaller input for these faces"
        return row
    row["rewritten"] = sizes.rewritten
    row["at_reduced"] = _timed(reduced, views, batch_size)
    full, small = row["at_full"], row["at_reduced"]
    row["speedup"] = round(full["ms_per_frame"] / small["ms_per_frame"], 2)
    row["model_speedup"] = round(full["model_ms_per_frame"] / max(small["model_ms_per_frame"], 1e-6), 2)
    return row


def detect_size_lines(rows: list[dict[str, Any]]) -> list[str]:
    """Table lines: per pack, ms per frame at the full input and at the reduced one, and the ratio."""
    figures = [(r.get("label", r.get("size", "?")), r["detect_size"]) for r in rows if r.get("detect_size")]
    if not figures:
        return []
    head = (
        f"{'detector, 4K large face':<28} {'full':>9} {'ms/fr':>7} {'model':>7}  "
        f"{'reduced':>9} {'ms/fr':>7} {'model':>7} {'ratio':>6} {'model':>6}"
    )
    lines = [head, "-" * len(head)]
    for label, d in figures:
        full = d["at_full"]
        left = f"{label:<28} {d['full']:>9} {full['ms_per_frame']:>7.1f} {full['model_ms_per_frame']:>7.1f}  "
        if "at_reduced" not in d:
            lines.append(left + f"{d['reduced']:>9}  {d.get('note', '')}")
            continue
        small = d["at_reduced"]
        lines.append(
            left + f"{d['reduced']:>9} {small['ms_per_frame']:>7.1f} {small['model_ms_per_frame']:>7.1f} "
            f"{d['speedup']:>6.2f} {d['model_speedup']:>6.2f}"
        )
    lines.append(
        "faces.detect_size auto: the smallest input keeping the smallest face >= 48 px; ms/fr = detect_batch "
        "(letterbox + model + decoding), model = the model call; ratio = full / reduced"
    )
    return lines
