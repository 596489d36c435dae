"""Landmark smoothing: jitter on a still face falls >= 5x, real motion is not delayed."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.tracking.smoothing import interpolate_gaps, one_euro, smooth_track
from pipeline.tracking.tracker import TrackingConfig
from tests.tracking_media import best_lag, mean_displacement

CONFIG = TrackingConfig()
FILTER = {
    "min_cutoff_hz": CONFIG.smoothing_min_cutoff_hz,
    "beta": CONFIG.smoothing_beta,
    "derivative_cutoff_hz": CONFIG.smoothing_derivative_cutoff_hz,
}


def at(n: int, rate: float = 24.0) -> np.ndarray:
    return np.arange(n, dtype=np.float64) / rate


def still_series(n: int, noise_px: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    truth = np.tile(
        np.array([[140.0, 100.0], [180.0, 100.0], [160.0, 120.0], [145.0, 140.0], [175.0, 140.0]]), (n, 1, 1)
    )
    return truth, truth + noise_px * rng.standard_normal(truth.shape)


@pytest.mark.parametrize("noise_px", [0.5, 1.5, 3.0])
def test_still_face_jitter_falls_at_least_5x(noise_px: float) -> None:
    _, noisy = still_series(120, noise_px, seed=int(noise_px * 10))
    smoothed = smooth_track(noisy.reshape(len(noisy), -1), at(len(noisy)), 100.0, **FILTER).reshape(
        noisy.shape
    )
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
    smoothed = smooth_track(raw.reshape(len(raw), -1), at(len(raw)), 100.0, **FILTER).reshape(raw.shape)
    assert abs(best_lag(smoothed, raw)) <= 1.0
    assert abs(best_lag(smoothed, truth)) <= 1.0
    # The causal filter alone does lag on this motion: the backward pass is what removes it.
    causal = one_euro(raw.reshape(len(raw), -1), at(len(raw)), 100.0, **FILTER).reshape(raw.shape)
    assert best_lag(causal, truth) > best_lag(smoothed, truth)


def test_linear_motion_is_reproduced_exactly_including_the_ends() -> None:
    truth = _motion("linear")
    smoothed = smooth_track(truth.reshape(len(truth), -1), at(len(truth)), 100.0, **FILTER).reshape(
        truth.shape
    )
    np.testing.assert_allclose(smoothed, truth, atol=1e-3)  # a thousandth of a pixel


def test_smoothing_is_deterministic_and_short_tracks_pass_through() -> None:
    _, noisy = still_series(50, 1.0, seed=9)
    flat = noisy.reshape(50, -1)
    assert np.array_equal(
        smooth_track(flat, at(50), 80.0, **FILTER), smooth_track(flat.copy(), at(50), 80.0, **FILTER)
    )
    assert np.array_equal(smooth_track(flat[:2], at(2), 80.0, **FILTER), flat[:2])


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


def _sine_at(times: np.ndarray) -> np.ndarray:
    """A face swaying 1.2 times a second, 40 px each way, sampled at ``times`` (seconds)."""
    base = np.array([[-20.0, -20.0], [20.0, -20.0], [0.0, 0.0], [-15.0, 20.0], [15.0, 20.0]])
    x = 200.0 + 40.0 * np.sin(2 * np.pi * 1.2 * times)
    centre = np.stack([x, np.full_like(x, 120.0)], axis=1)
    return (centre[:, None, :] + base[None]).reshape(len(times), -1)


@pytest.mark.parametrize("rate", [23.976, 25.0, 30.0, 60.0])
def test_cutoffs_are_in_seconds_so_frame_rates_smooth_alike(rate: float) -> None:
    """The same motion at other frame rates gives the same smoothed path in time as at 24 fps."""
    seconds = 4.0
    ref_t = at(int(seconds * 24))
    t = at(int(seconds * rate), rate)
    ref = smooth_track(_sine_at(ref_t), ref_t, 100.0, **FILTER)
    out = smooth_track(_sine_at(t), t, 100.0, **FILTER)
    # Compare at the 24 fps instants, interpolating the other rate's smoothed path there.
    inner = (ref_t > 0.5) & (ref_t < seconds - 0.5)
    resampled = np.stack([np.interp(ref_t[inner], t, out[:, k]) for k in range(out.shape[1])], axis=1)
    truth = _sine_at(ref_t[inner])
    # within 1.6 px of the 24 fps path on an 80 px sway (cutoffs per frame would differ by 2.1 px at 60 fps)
    assert np.max(np.abs(resampled - ref[inner])) < 1.6
    assert np.max(np.abs(ref[inner] - truth)) < 4.0  # and follows it (peaks of a 40 px sway within 4 px)
    # still-face jitter falls >= 5x at every rate
    _, noisy = still_series(len(t), 1.5, seed=11)
    flat = noisy.reshape(len(t), -1)
    smoothed = smooth_track(flat, t, 100.0, **FILTER)
    assert mean_displacement(flat.reshape(-1, 5, 2)) / mean_displacement(smoothed.reshape(-1, 5, 2)) >= 5.0


def test_variable_frame_rate_is_filtered_by_real_time() -> None:
    """Irregular frame times (VFR sources): a linear motion in time comes out unchanged."""
    rng = np.random.default_rng(5)
    times = np.cumsum(rng.choice([1 / 24, 1 / 30, 1 / 60, 1 / 12], size=120))
    truth = np.stack([40.0 + 96.0 * times, 120.0 + 12.0 * times], axis=1)
    values = np.repeat(truth[:, None, :], 5, axis=1).reshape(len(times), -1)
    smoothed = smooth_track(values, times, 100.0, **FILTER)
    error = np.abs(smoothed - values)
    # Filtering by frame index instead, as if the frames were evenly spaced, bends the path.
    by_index = np.abs(smooth_track(values, at(len(times)), 100.0, **FILTER) - values)
    assert error.max() < 0.5 and error.mean() < 0.1, (error.max(), error.mean())
    assert by_index.max() > 2 * error.max() and by_index.mean() > 2 * error.mean()
    with pytest.raises(ValueError, match="increasing"):
        smooth_track(values, times[::-1], 100.0, **FILTER)
    with pytest.raises(ValueError, match="do not match"):
        smooth_track(values, times[:-1], 100.0, **FILTER)
