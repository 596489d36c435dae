"""Landmarks at the plate's own resolution: a real face on 4K and 1080p frames, moving at constant
velocity and standing still under grain, detected by the default pack's detector through its
letterbox and then again on a crop at the plate's resolution (``faces.refine: auto``), then tracked
and smoothed into the render plan as a job does.

The letterbox sees a 4K frame at a sixth of its size: its landmarks wobble by several plate pixels
from frame to frame around the true motion, and the replaced face with them.  Measured where the
face is pasted (the centroid of the plan's five landmarks, which place the swapper's crop): its
acceleration against the constant motion, and a still face's spread.
"""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from pipeline.faces.analyze import FaceAnalyzer
from pipeline.faces.config import SelectionConfig
from pipeline.faces.refine import refine_faces
from pipeline.qc.config import QcConfig
from pipeline.qc.marks import ShotTracks
from pipeline.qc.stability import jitter
from pipeline.tracking.faceplan import plan_shot
from pipeline.tracking.tracker import TrackingConfig, track_chunk
from tests.faces_data import face_patches

FRAMES = 24
SPEED = 10  # plate pixels per frame, in x


def _frames(size: tuple[int, int], face_height: int, speed: int, seed: int) -> list[np.ndarray]:
    """``FRAMES`` frames of ``size`` (width, height): a real head ``face_height`` px tall moving
    ``speed`` px a frame to the right, with grain (sigma 2 code values) of its own in every frame."""
    width, height = size
    patch = face_patches()[0]  # the astronaut
    scale = face_height / patch.shape[0]
    head = cv2.resize(patch, None, fx=scale, fy=scale, interpolation=cv2.INTER_CUBIC)
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:height, 0:width]
    background = np.stack([90 + 30 * np.sin(xx / 97.0), 100 + 20 * np.cos(yy / 61.0), 80 + 0 * xx], -1)
    out = []
    for t in range(FRAMES):
        frame = background.copy()
        x0, y0 = width // 3 + speed * t, (height - head.shape[0]) // 2
        frame[y0 : y0 + head.shape[0], x0 : x0 + head.shape[1]] = head
        frame = frame + rng.normal(0.0, 2.0, frame.shape)
        out.append(np.clip(np.rint(frame), 0, 255).astype(np.uint8))
    return out


def _landmarks(analyzer: FaceAnalyzer, frames: list[np.ndarray], *, refine: bool) -> np.ndarray:
    """The detected landmarks, as the render plan places them (tracked, smoothed): (T, 5, 2).

    With ``refine``, QC's jitter check finds nothing to flag on the plan."""
    found = analyzer.analyze(frames, embed=False, refine=refine)
    assert all(len(faces) == 1 for faces in found), [len(f) for f in found]
    config = TrackingConfig()
    ids, _ = track_chunk(found, 0, config, None)
    times = [i / 24.0 for i in range(len(found))]
    plan = plan_shot(found, ids, SelectionConfig(mode="all", source="hero"), {}, config, frame_times=times)
    assert all(len(tasks) == 1 for tasks in plan.tasks)
    _, flagged = jitter(ShotTracks.build(found, ids, plan), len(found), QcConfig())
    if refine:
        assert flagged == [], [m.detail for m in flagged]
    return np.stack([np.asarray(tasks[0].landmarks, np.float64) for tasks in plan.tasks])


def _paste(marks: np.ndarray) -> np.ndarray:
    """Where the face is pasted in each frame: the centroid of its five landmarks (T, 2)."""
    return marks.mean(axis=1)


def _acceleration_rms(points: np.ndarray) -> float:
    """RMS of the frame-to-frame acceleration (px/frame^2), per axis: 0 for constant velocity."""
    return float(np.sqrt(np.mean(np.diff(points, n=2, axis=0) ** 2)))


@pytest.mark.parametrize(
    ("size", "face_height", "bound"),
    [((3840, 2160), 600, 2.0), ((1920, 1080), 300, 1.0)],
    ids=["4k", "1080p"],
)
def test_refined_landmarks_follow_a_face_at_constant_velocity(
    default_models, size, face_height, bound
) -> None:
    analyzer = FaceAnalyzer(default_models, batch_size=4)
    frames = _frames(size, face_height, SPEED, seed=1)
    letterbox = _landmarks(analyzer, frames, refine=False)
    refined = _landmarks(analyzer, frames, refine=True)
    before, after = _acceleration_rms(letterbox), _acceleration_rms(refined)
    print(
        f"FIGURE {size[0]}x{size[1]} paste acceleration RMS px/frame^2: letterbox {before:.2f}, refined {after:.2f}"
    )
    assert after <= bound and after < before
    # The refined landmarks move with the face: 10 px a frame in x, none in y.
    velocity = np.diff(refined, axis=0).mean(axis=(0, 1))
    assert abs(velocity[0] - SPEED) < 0.5 and abs(velocity[1]) < 0.5
    # ...and place the face where the letterbox did, more precisely: within one of its pixels on average.
    assert np.abs(_paste(refined) - _paste(letterbox)).mean(axis=0).max() < size[0] / 640
    seconds = analyzer.stage_seconds
    assert seconds["refine"] > 0
    print(
        f"FIGURE {size[0]}x{size[1]} refine {seconds['refine']:.2f} s of detect {seconds['detect']:.2f} s (both passes)"
    )


def test_a_still_face_under_grain_stays_put(default_models) -> None:
    analyzer = FaceAnalyzer(default_models, batch_size=4)
    frames = _frames((3840, 2160), 600, 0, seed=2)
    refined = _landmarks(analyzer, frames, refine=True)
    paste = _paste(refined)
    spread = np.abs(paste - paste.mean(axis=0)).max()
    print(f"FIGURE still 4K face under grain, the paste's largest offset from its mean: {spread:.2f} px")
    assert spread <= 0.5


def test_faces_the_letterbox_shows_large_enough_are_left_as_they_are(default_models) -> None:
    """A 720p frame's face: the letterbox shows it at over a third of what a crop could; not refined."""
    frames = _frames((1280, 720), 240, SPEED, seed=3)[:2]
    detector = default_models.detector
    found = [detector.detect_batch([f])[0] for f in frames]
    refined = refine_faces(detector, frames, found, batch_size=4)
    assert all(a[0] is b[0] for a, b in zip(found, refined, strict=True))
