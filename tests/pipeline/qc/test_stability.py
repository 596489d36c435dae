"""Jitter on real smoothed landmarks, flicker and seams from measure series over a real still face."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.faces.config import SelectionConfig
from pipeline.qc.analyze import analyze_shot
from pipeline.qc.config import QcConfig
from pipeline.qc.stability import flicker_value
from pipeline.qc.staged import finish_checks, plan_checks
from tests.faces_data import still_noise_clip
from tests.pipeline.qc.shots import (
    FIRST_NUMBER,
    RealShot,
    detect,
    numbers_of,
    qc,
    qc_inputs,
    still_measures,
    track_and_plan,
    with_landmarks,
)

N = 30
ALL = SelectionConfig(mode="all", source="anna")
CONFIG = QcConfig()


@pytest.fixture(scope="module")
def still(default_models) -> RealShot:
    faces = detect(default_models, still_noise_clip(N).frames)
    assert all(len(f) == 1 for f in faces)
    return track_and_plan(faces, ALL)


def _eye_distance(shot: RealShot) -> float:
    return float(np.median([np.linalg.norm(f[0].landmarks[1] - f[0].landmarks[0]) for f in shot.plan.tasks]))


def test_smoothed_real_landmarks_do_not_jitter(still: RealShot) -> None:
    result = qc(still, selection=ALL)
    assert result.counts["jitter"] == 0
    values = [v for v in result.series.jitter if v is not None]
    assert len(values) == N - 2 and 0 < max(values) < CONFIG.max_jitter


@pytest.mark.parametrize("times_threshold", [0.25, 3.0])
def test_landmark_noise_is_jitter_above_the_threshold_only(still: RealShot, times_threshold: float) -> None:
    """Noise on frames 10-19; its mean acceleration (sqrt(6 pi / 2) sigma) set relative to max_jitter."""
    rng = np.random.default_rng(3)
    sigma = times_threshold * CONFIG.max_jitter * _eye_distance(still) / np.sqrt(6 * np.pi / 2)
    noisy = with_landmarks(still.plan, {i: rng.normal(0.0, sigma, (5, 2)) for i in range(10, 20)})
    result = qc(still, selection=ALL, plan=noisy)
    flagged = numbers_of(result.flags, "jitter")
    if times_threshold < 1:
        assert flagged == []
        return
    # Acceleration at frame i needs frames i-1..i+1: only frames 9-20 can be affected.
    assert flagged and set(flagged) <= set(range(FIRST_NUMBER + 9, FIRST_NUMBER + 21))
    assert len(flagged) >= 6
    worst = max(f.value for f in result.flags if f.reason == "jitter")
    assert CONFIG.max_jitter < worst < 10 * times_threshold * CONFIG.max_jitter


def test_flicker_seam_and_chunk_boundaries(still: RealShot) -> None:
    plate = np.full(N, 0.40)
    out = np.full(N, 0.45)  # the new face is a little brighter than the plate's
    out[4:8] += np.array([0.08, 0.0, 0.08, 0.0])  # the render alternates on a still plate: 4..7 change
    out[12:] += 0.05  # the second chunk came out brighter: one jump across its boundary at 12
    ramp = np.clip(np.arange(N) - 20, 0, 5) * 0.04  # a light comes on at 21-25, in plate and output alike
    plate += ramp
    out += ramp * 0.95
    seam = np.full(N, 1.2)
    seam[26:28] = 4.0
    measures = still_measures(still.plan, out, plate, seam)
    result = qc(still, selection=ALL, measures=measures, chunk_starts=[0, 12, 24])

    flicker = sorted((f for f in result.flags if f.reason == "flicker"), key=lambda f: f.first)
    assert [(f.first - FIRST_NUMBER, f.last - FIRST_NUMBER) for f in flicker] == [(4, 7), (11, 12)]
    alternating, boundary = flicker
    assert alternating.value == pytest.approx(0.08 / CONFIG.flicker_floor)
    assert not alternating.extra.get("chunk_boundary")
    assert boundary.extra["chunk_boundary"] is True and "chunk boundary" in boundary.detail
    assert boundary.value == pytest.approx(0.05 / CONFIG.flicker_floor)
    # The light coming on is not flicker, nor the boundary at 24 inside it.
    series = result.series.flicker
    assert all(v is not None and v < CONFIG.max_flicker for v in series[21:26])
    assert result.boundaries[FIRST_NUMBER + 12] == pytest.approx(5.0)
    assert result.boundaries[FIRST_NUMBER + 24] is not None and result.boundaries[FIRST_NUMBER + 24] < 1

    (seam_flag,) = [f for f in result.flags if f.reason == "seam"]
    assert (seam_flag.first, seam_flag.last) == (FIRST_NUMBER + 26, FIRST_NUMBER + 27)
    assert seam_flag.value == 4.0 and seam_flag.threshold == CONFIG.max_seam
    assert result.series.seam[0] == pytest.approx(1.2)
    # Sorted worst first; every severity within 0-1.
    severities = [f.severity for f in result.flags]
    assert severities == sorted(severities, reverse=True) and all(0 <= s <= 1 for s in severities)


def test_the_two_stages_conclude_what_one_pass_does(still: RealShot) -> None:
    """The planner actor's two stages (at planning: no measures, no stability checks; at publish: the
    actors' measures) flag and chart what one pass over everything does: jitter, flicker, seams."""
    rng = np.random.default_rng(3)
    sigma = 3.0 * CONFIG.max_jitter * _eye_distance(still) / np.sqrt(6 * np.pi / 2)
    noisy = with_landmarks(still.plan, {i: rng.normal(0.0, sigma, (5, 2)) for i in range(10, 20)})
    plate = np.full(N, 0.40)
    out = plate + 0.05
    out[4:8] += np.array([0.08, 0.0, 0.08, 0.0])
    seam = np.full(N, 1.2)
    seam[26:28] = 4.0
    measures = still_measures(noisy, out, plate, seam)
    inputs = qc_inputs(still, selection=ALL, chunk_starts=[0, 12, 24], plan=noisy)
    whole = analyze_shot(inputs, measures, CONFIG)
    staged = finish_checks(plan_checks(inputs, CONFIG), measures, CONFIG)
    assert {f.reason for f in whole.flags} >= {"jitter", "flicker", "seam"}
    assert staged.flags == whole.flags
    for name in ("jitter", "flicker", "seam", "coverage", "numbers"):
        assert getattr(staged.series, name) == getattr(whole.series, name), name
    assert staged.boundaries == whole.boundaries


def test_flicker_value_cancels_what_the_plate_did() -> None:
    from pipeline.qc.records import FaceMeasure

    def m(out: float, plate: float) -> FaceMeasure:
        return FaceMeasure(0, 0, "a", None, (out,) * 48, (plate,) * 48, 1.0, 1.0)

    assert flicker_value(m(0.5, 0.5), m(0.7, 0.7), 0.01) == 0.0  # lighting change in both
    assert flicker_value(m(0.5, 0.5), m(0.505, 0.5), 0.01) == 0.0  # below the floor
    assert flicker_value(m(0.5, 0.5), m(0.6, 0.5), 0.01) == pytest.approx(10.0)  # still plate
    assert flicker_value(m(0.5, 0.5), m(0.9, 0.7), 0.01) == pytest.approx(1.0)  # 0.2 extra over 0.2
    with pytest.raises(ValueError, match="grid"):
        flicker_value(m(0.5, 0.5), FaceMeasure(1, 0, "a", None, (0.5,) * 3, (0.5,) * 48, 1.0, 1.0), 0.01)
