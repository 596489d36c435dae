"""Steadiness of the replaced face on large plates (``--steady``): where the face is pasted, frame to frame.

A real head (the astronaut of ``skimage.data``, enlarged) on 4K and 1080p frames with grain of its own
in every frame, moving 10 px a frame at constant velocity, and standing still; detected by the pack's
detector through its letterbox (``faces.refine: off``) and again at the plate's resolution
(``faces.refine: auto``), then tracked and smoothed into the render plan as a job does.  The paste
position is the centroid of the plan's five landmarks, which place the swapper's crop: its
acceleration RMS against the constant motion (targets: <= 1 px/frame² at 1080p, <= 2 at 4K), a still
face's largest offset from its mean (<= 0.5 px), and the frames QC's jitter check flags.  The same
plan is then rendered (the pack's swapper, a real identity) and the replaced region measured in the
pixels, as an artist would see it: the centroid of ``|output - plate|`` (weighted by the change), its
acceleration RMS or largest offset the same way.
"""

from __future__ import annotations

from typing import Any

import cv2
import numpy as np

ASTRONAUT_FACE = (179, 63, 269, 174)
"""The astronaut's face box (x1, y1, x2, y2) in ``skimage.data.astronaut()``."""
FRAMES = 24
SPEED = 10
"""Plate pixels per frame, in x."""
TARGETS = {"1920x1080": 1.0, "3840x2160": 2.0, "still": 0.5}
CASES = (((1920, 1080), 300, SPEED), ((3840, 2160), 600, SPEED), ((3840, 2160), 600, 0))
"""(plate size, face height in px, speed): the moving 1080p and 4K faces, and the still 4K one."""


def head(face_height: int) -> np.ndarray:
    """The astronaut's head with a margin, enlarged to ``face_height`` px tall (RGB uint8)."""
    from jobs.demo_media import astronaut_rgb

    picture = astronaut_rgb()
    x1, y1, x2, y2 = ASTRONAUT_FACE
    mx, my = 0.35 * (x2 - x1), 0.35 * (y2 - y1)
    patch = picture[int(y1 - my) : int(y2 + my), int(x1 - mx) : int(x2 + mx)]
    scale = face_height / patch.shape[0]
    return cv2.resize(patch, None, fx=scale, fy=scale, interpolation=cv2.INTER_CUBIC)


def steady_frames(size: tuple[int, int], face_height: int, speed: int, *, seed: int) -> list[np.ndarray]:
    """:data:`FRAMES` frames of ``size`` (width, height): the head moving ``speed`` px a frame to the
    right on a soft background, with grain (sigma 2 code values) of its own in every frame."""
    width, height = size
    face = head(face_height)
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:height, 0:width]
    background = np.stack([90 + 30 * np.sin(xx / 97.0), 100 + 20 * np.cos(yy / 61.0), 80 + 0 * xx], -1)
    out = []
    for t in range(FRAMES):
        frame = background.copy()
        x0, y0 = width // 3 + speed * t, (height - face.shape[0]) // 2
        frame[y0 : y0 + face.shape[0], x0 : x0 + face.shape[1]] = face
        frame = frame + rng.normal(0.0, 2.0, frame.shape)
        out.append(np.clip(np.rint(frame), 0, 255).astype(np.uint8))
    return out


def planned_landmarks(
    analyzer: Any, frames: list[np.ndarray], *, refine: bool
) -> tuple[np.ndarray, int, Any]:
    """The frames' one face's landmarks as the render plan places them (detected, tracked, smoothed;
    (T, 5, 2)), how many frames QC's jitter check flags on that plan, and the plan."""
    from pipeline.faces.config import SelectionConfig
    from pipeline.qc.config import QcConfig
    from pipeline.qc.marks import ShotTracks
    from pipeline.qc.stability import jitter
    from pipeline.tracking.faceplan import plan_shot
    from pipeline.tracking.tracker import TrackingConfig, track_chunk

    found = analyzer.analyze(frames, embed=False, refine=refine)
    if not all(len(faces) == 1 for faces in found):
        raise RuntimeError(f"expected one face a frame, found {[len(f) for f in found]}")
    config = TrackingConfig()
    ids, _ = track_chunk(found, 0, config, None)
    times = [i / 24.0 for i in range(len(found))]
    plan = plan_shot(found, ids, SelectionConfig(mode="all", source="hero"), {}, config, frame_times=times)
    _, flagged = jitter(ShotTracks.build(found, ids, plan), len(found), QcConfig())
    marks = np.stack([np.asarray(tasks[0].landmarks, np.float64) for tasks in plan.tasks])
    return marks, len(flagged), plan


def replaced_centroids(renderer: Any, frames: list[np.ndarray], plan: Any) -> np.ndarray:
    """Each frame's replaced region as rendered: the centroid (x, y) of ``|output - plate|`` summed
    over the channels, weighted by it (T, 2)."""
    out = []
    for frame, tasks in zip(frames, plan.tasks, strict=True):
        (rendered,) = renderer.render([frame], [tasks])
        change = np.abs(rendered.astype(np.float64) - frame.astype(np.float64)).sum(axis=-1)
        yy, xx = np.nonzero(change)
        weights = change[yy, xx]
        out.append((np.average(xx, weights=weights), np.average(yy, weights=weights)))
    return np.asarray(out)


def hero(models: Any) -> Any:
    """The identity the renders use: face 1 of insightface's sample picture."""
    from jobs.demo_media import insightface_image
    from pipeline.faces.identity import identity_from_images

    path = insightface_image("t1.jpg")
    loaded = cv2.imread(path)
    if loaded is None:
        raise FileNotFoundError(path)
    return identity_from_images(
        "hero", [(path, cv2.cvtColor(loaded, cv2.COLOR_BGR2RGB))], models, face_index=1
    )


def paste(marks: np.ndarray) -> np.ndarray:
    """Where the face is pasted in each frame: the centroid of its five landmarks (T, 2)."""
    return marks.mean(axis=1)


def acceleration_rms(points: np.ndarray) -> float:
    """RMS of the frame-to-frame acceleration (px/frame², per axis): 0 for constant velocity."""
    return float(np.sqrt(np.mean(np.diff(points, n=2, axis=0) ** 2)))


def largest_offset(points: np.ndarray) -> float:
    """The largest distance, per axis, of a position from the positions' mean (px)."""
    return float(np.abs(points - points.mean(axis=0)).max())


def steadiness(models: Any) -> dict[str, Any]:
    """The figures of every case of :data:`CASES`, letterboxed and refined."""
    from pipeline.faces.analyze import FaceAnalyzer
    from pipeline.faces.config import FaceConfig
    from pipeline.faces.renderers.cpu import FaceRenderer

    renderer = FaceRenderer(models, {"hero": hero(models)}, FaceConfig())
    rows = []
    for seed, (size, face_height, speed) in enumerate(CASES, start=1):
        frames = steady_frames(size, face_height, speed, seed=seed)
        row: dict[str, Any] = {"size": f"{size[0]}x{size[1]}", "face_px": face_height, "speed_px": speed}
        for refine in (False, True):
            analyzer = FaceAnalyzer(models, batch_size=4)
            marks, flagged, plan = planned_landmarks(analyzer, frames, refine=refine)
            where = paste(marks)
            key = "refined" if refine else "letterbox"
            figure = acceleration_rms(where) if speed else largest_offset(where)
            row[key] = round(figure, 3)
            pixels = replaced_centroids(renderer, frames, plan)
            row[f"{key}_rendered"] = round(acceleration_rms(pixels) if speed else largest_offset(pixels), 3)
            row[f"{key}_jitter_flags"] = flagged
            row[f"{key}_detect_seconds"] = round(analyzer.stage_seconds["detect"], 3)
        row["measure"] = "acceleration RMS px/frame²" if speed else "largest offset px"
        row["target"] = TARGETS[row["size"] if speed else "still"]
        rows.append(row)
    return {"cases": rows, "frames": FRAMES}


def steady_table(figures: dict[str, Any]) -> str:
    """The scenario's rows as text."""
    lines = [
        (
            f"Steadiness of the paste ({figures['frames']} frames, real face under grain; letterbox = faces.refine:"
            " off; plan = the landmarks' centroid, rendered = the changed pixels' centroid)"
        ),
        (
            f"  {'plate':<10} {'face':>5} {'speed':>6}  {'measure':<27} {'letterbox':>9} {'refined':>8}"
            f" {'rendered off/auto':>17} {'target':>7}  {'QC jitter flags':>15}  detect s (off/auto)"
        ),
    ]
    for r in figures["cases"]:
        met = "met" if max(r["refined"], r["refined_rendered"]) <= r["target"] else "MISSED"
        lines.append(
            f"  {r['size']:<10} {r['face_px']:>5} {r['speed_px']:>6}  {r['measure']:<27} {r['letterbox']:>9.2f}"
            f" {r['refined']:>8.2f} {r['letterbox_rendered']:>8.2f}/{r['refined_rendered']:<8.2f} {r['target']:>7.1f}"
            f"  {r['letterbox_jitter_flags']:>6} / {r['refined_jitter_flags']:<6}"
            f"  {r['letterbox_detect_seconds']:.2f} / {r['refined_detect_seconds']:.2f}  {met}"
        )
    return "\n".join(lines)
