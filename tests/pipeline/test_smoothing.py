"""Landmark smoothing: jitter on a still face falls >= 5x, real motion is not delayed."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.smoothing import interpolate_gaps, one_euro, smooth_track
from pipeline.tracking import TrackingConfig
from tests.tracking_media import best_lag, mean_displacement

CONFIG = TrackingConfig()
FILTER = {
    "min_cutoff": CONFIG.smoothing_min_cutoff,
    "beta": CONFIG.smoothing_beta,
    "derivative_cutoff": CONFIG.smoothing_derivative_cutoff,
}


def still_series(n: int, noise_px: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    truth = np.tile(
        np.array([[140.0, 100.0], [180.0, 100.0], [160.0, 120.0], [145.0, 140.0], [175.0, 140.0]]), (n, 1, 1)
    )
    return truth, truth + noise_px * rng.standard_normal(truth.shape)


@pytest.mark.parametrize("noise_px", [0.5, 1.5, 3.0])
def test_still_face_jitter_falls_at_least_5x(noise_px: float) -> None:
    _, noisy = still_series(120, noise_px, seed=int(noise_px * 10))
    smoothed = smooth_track(noisy.reshape(len(noisy), -1), 100.0, **FILTER).reshape(noisy.shape)
    before, after = mean_displacement(noisy), mean_displacement(smoothed)
    assert before / after >= 5.0, (before, after)


def _motion(kind: str, n: int = 100) -> np.ndarray:
    t = np.arange(n, dtype=np.float64)[:, None]
    base = np.array([[-20.0, -20.0], [20.0, -20.0], [0.0, 0.0], [-15.0, 20.0], [15.0, 20.0]])
    if kind == "linear":
        centre = np.concatenate([40.0 + 4.0 * t, 120.0 + 0.5 * t], axis=1)
    elif kind == "sine":
        centre = np.concatenate(
            [200.0 + 60.0 * np.sin(2 * np.pi * t / 40.0), 120.0 + 10.0 * np.cos(2 * np.pi * t / 25.0)], axis=1
        )
    elif kind == "start_stop":  # still, sudden walk, still again
        x = np.clip(t - 30.0, 0.0, 40.0) * 5.0
        centre = np.concatenate([100.0 + x, 120.0 + 0.0 * t], axis=1)
    else:
        raise ValueError(kind)
    return centre[:, None, :] + base[None]


@pytest.mark.parametrize("kind", ["linear", "sine", "start_stop"])
@pytest.mark.parametrize("noise_px", [0.0, 1.0])
def test_real_motion_lags_at_most_one_frame(kind: str, noise_px: float) -> None:
    truth = _motion(kind)
    rng = np.random.default_rng(3)
    raw = truth + noise_px * rng.standard_normal(truth.shape)
    smoothed = smooth_track(raw.reshape(len(raw), -1), 100.0, **FILTER).reshape(raw.shape)
    assert abs(best_lag(smoothed, raw)) <= 1.0
    assert abs(best_lag(smoothed, truth)) <= 1.0
    # The causal filter alone does lag on this motion: the backward pass is what removes it.
    causal = one_euro(raw.reshape(len(raw), -1), 100.0, **FILTER).reshape(raw.shape)
    assert best_lag(causal, truth) > best_lag(smoothed, truth)


def test_linear_motion_is_reproduced_exactly_including_the_ends() -> None:
    truth = _motion("linear")
    smoothed = smooth_track(truth.reshape(len(truth), -1), 100.0, **FILTER).reshape(truth.shape)
    np.testing.assert_allclose(smoothed, truth, atol=1e-3)  # a thousandth of a pixel


def test_smoothing_is_deterministic_and_short_tracks_pass_through() -> None:
    _, noisy = still_series(50, 1.0, seed=9)
    flat = noisy.reshape(50, -1)
    assert np.array_equal(smooth_track(flat, 80.0, **FILTER), smooth_track(flat.copy(), 80.0, **FILTER))
    assert np.array_equal(smooth_track(flat[:2], 80.0, **FILTER), flat[:2])


def test_interpolate_gaps_fills_missing_frames_linearly() -> None:
    frames = np.array([3, 4, 8, 9])
    values = np.array([[0.0, 10.0], [1.0, 10.0], [5.0, 2.0], [6.0, 2.0]])
    dense, out, interpolated = interpolate_gaps(frames, values)
    assert dense.tolist() == [3, 4, 5, 6, 7, 8, 9]
    assert interpolated.tolist() == [False, False, True, True, True, False, False]
    np.testing.assert_allclose(out[:, 0], [0, 1, 2, 3, 4, 5, 6])
    np.testing.assert_allclose(out[:, 1], [10, 10, 8, 6, 4, 2, 2])
    with pytest.raises(ValueError, match="strictly increasing"):
        interpolate_gaps(np.array([1, 1]), values[:2])
