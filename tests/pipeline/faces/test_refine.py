"""Landmarks at the plate's own resolution: a real face on 4K and 1080p frames, moving at constant
velocity and standing still under grain, detected by the default pack's detector through its
letterbox and then again on a crop at the plate's resolution (``faces.refine: auto``), then tracked
and smoothed into the render plan as a job does (``bench.steady``, the benchmark's ``--steady``).

The letterbox sees a 4K frame at a sixth of its size: its landmarks wobble by several plate pixels
from frame to frame around the true motion, and the replaced face with them.  Measured where the
face is pasted (the centroid of the plan's five landmarks, which place the swapper's crop): its
acceleration against the constant motion, and a still face's spread; and in the rendered pixels,
where an artist sees it (the centroid of the changed pixels).
"""

from __future__ import annotations

import numpy as np
import pytest

from bench.steady import (
    SPEED,
    acceleration_rms,
    hero,
    largest_offset,
    paste,
    planned_landmarks,
    replaced_centroids,
    steadiness,
    steady_frames,
    steady_table,
)
from pipeline.faces.analyze import FaceAnalyzer
from pipeline.faces.config import FaceConfig
from pipeline.faces.refine import refine_faces
from pipeline.faces.renderers.cpu import FaceRenderer


@pytest.mark.parametrize(
    ("size", "face_height", "bound"),
    [((3840, 2160), 600, 2.0), ((1920, 1080), 300, 1.0)],
    ids=["4k", "1080p"],
)
def test_refined_landmarks_follow_a_face_at_constant_velocity(
    default_models, size, face_height, bound
) -> None:
    analyzer = FaceAnalyzer(default_models, batch_size=4)
    frames = steady_frames(size, face_height, SPEED, seed=1)
    letterbox, _, _ = planned_landmarks(analyzer, frames, refine=False)
    refined, flagged, plan = planned_landmarks(analyzer, frames, refine=True)
    before, after = acceleration_rms(paste(letterbox)), acceleration_rms(paste(refined))
    print(
        f"FIGURE {size[0]}x{size[1]} paste acceleration RMS px/frame^2: letterbox {before:.2f}, refined {after:.2f}"
    )
    assert after <= bound and after < before
    assert flagged == 0  # QC's jitter check finds nothing on the refined plan
    # The refined landmarks move with the face: 10 px a frame in x, none in y.
    velocity = np.diff(refined, axis=0).mean(axis=(0, 1))
    assert abs(velocity[0] - SPEED) < 0.5 and abs(velocity[1]) < 0.5
    # ...and place the face where the letterbox did, more precisely: within one of its pixels on average.
    assert np.abs(paste(refined) - paste(letterbox)).mean(axis=0).max() < size[0] / 640
    seconds = analyzer.stage_seconds
    assert seconds["refine"] > 0
    print(
        f"FIGURE {size[0]}x{size[1]} refine {seconds['refine']:.2f} s of detect {seconds['detect']:.2f} s (both passes)"
    )
    # As rendered: the changed pixels' centroid moves as steadily as the plan's landmarks.
    renderer = FaceRenderer(default_models, {"hero": hero(default_models)}, FaceConfig())
    rendered = acceleration_rms(replaced_centroids(renderer, frames, plan))
    print(f"FIGURE {size[0]}x{size[1]} replaced region centroid acceleration RMS px/frame^2: {rendered:.2f}")
    assert rendered <= bound


def test_a_still_face_under_grain_stays_put(default_models) -> None:
    analyzer = FaceAnalyzer(default_models, batch_size=4)
    frames = steady_frames((3840, 2160), 600, 0, seed=2)
    refined, flagged, plan = planned_landmarks(analyzer, frames, refine=True)
    spread = largest_offset(paste(refined))
    print(f"FIGURE still 4K face under grain, the paste's largest offset from its mean: {spread:.2f} px")
    assert spread <= 0.5 and flagged == 0
    renderer = FaceRenderer(default_models, {"hero": hero(default_models)}, FaceConfig())
    rendered = largest_offset(replaced_centroids(renderer, frames, plan))
    print(f"FIGURE still 4K face, the replaced region's centroid's largest offset: {rendered:.2f} px")
    assert rendered <= 0.5


def test_faces_the_letterbox_shows_large_enough_are_left_as_they_are(default_models) -> None:
    """A 720p frame's face: the letterbox shows it at half its size already; not refined."""
    frames = steady_frames((1280, 720), 240, SPEED, seed=3)[:2]
    detector = default_models.detector
    found = [detector.detect_batch([f])[0] for f in frames]
    refined = refine_faces(detector, frames, found, batch_size=4)
    assert all(a[0] is b[0] for a, b in zip(found, refined, strict=True))


@pytest.mark.slow
def test_the_benchmark_scenario_reports_every_case(default_models) -> None:
    figures = steadiness(default_models)
    rows = {(r["size"], r["speed_px"]): r for r in figures["cases"]}
    assert set(rows) == {("1920x1080", SPEED), ("3840x2160", SPEED), ("3840x2160", 0)}
    assert all(r["refined"] <= r["target"] and r["refined_jitter_flags"] == 0 for r in rows.values())
    assert all(r["refined_rendered"] <= r["target"] for r in rows.values())
    table = steady_table(figures)
    assert table.count("met") == 3 and "MISSED" not in table
