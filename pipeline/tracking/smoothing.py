"""Temporal filters for face tracks: gap interpolation and zero-phase One-Euro smoothing.

The plan is built with the whole shot in hand, so the smoother may look ahead:
a One-Euro filter (Casiez et al. 2012: an exponential smoother whose cutoff
rises with speed) is run forward and then backward over each track.  The
backward pass cancels the forward pass's lag, so real motion is not delayed,
while still faces get two passes of low-pass filtering against detector jitter.
One cutoff is shared by every coordinate of a face at a given frame, so the
five landmarks move together and the face shape is not distorted.
"""

from __future__ import annotations

import math

import numpy as np


def interpolate_gaps(frames: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Fill missing frames of a track by linear interpolation.

    ``frames`` (N,) strictly increasing ints, ``values`` (N, K).  Returns the
    dense frame range ``frames[0]..frames[-1]``, the (M, K) values there and a
    bool mask (M,) that is True where a value was interpolated.
    """
    frames = np.asarray(frames, dtype=np.int64)
    values = np.asarray(values, dtype=np.float64)
    if frames.ndim != 1 or values.ndim != 2 or len(frames) != len(values) or len(frames) == 0:
        raise ValueError(f"interpolate_gaps: frames {frames.shape} and values {values.shape} do not match")
    if np.any(np.diff(frames) <= 0):
        raise ValueError("interpolate_gaps: frames must be strictly increasing")
    dense = np.arange(frames[0], frames[-1] + 1, dtype=np.int64)
    out = np.empty((len(dense), values.shape[1]), dtype=np.float64)
    for k in range(values.shape[1]):
        out[:, k] = np.interp(dense, frames, values[:, k])
    observed = np.zeros(len(dense), dtype=bool)
    observed[frames - frames[0]] = True
    return dense, out, ~observed


def _alpha(cutoff_hz: float, dt: float) -> float:
    # Smoothing factor of a first-order low-pass at ``cutoff_hz`` over a step of ``dt`` seconds.
    tau = 1.0 / (2.0 * math.pi * cutoff_hz)
    return 1.0 / (1.0 + tau / dt)


def _steps(times: np.ndarray, n: int) -> np.ndarray:
    """Seconds between consecutive samples (n - 1,), checked to be increasing."""
    t = np.asarray(times, dtype=np.float64)
    if t.shape != (n,):
        raise ValueError(f"times {t.shape} do not match {n} samples")
    dt = np.diff(t)
    if np.any(dt <= 0):
        raise ValueError("times must be strictly increasing")
    return dt


def one_euro(
    values: np.ndarray,
    times: np.ndarray,
    scale: float,
    *,
    min_cutoff_hz: float,
    beta: float,
    derivative_cutoff_hz: float,
) -> np.ndarray:
    """Causal One-Euro filter over a (T, K) series sampled at ``times`` (seconds, increasing).

    Cutoffs are in Hz and every step uses its real duration, so a shot at 24,
    25, 30 or 60 fps (or a variable frame rate) is smoothed the same in time.
    The speed driving the cutoff is the RMS over the K coordinates of the
    filtered rate of change, in ``scale`` units per second (e.g. face sizes,
    with ``scale`` the face size in pixels), so ``beta`` does not depend on
    resolution: cutoff = ``min_cutoff_hz + beta * speed``.
    """
    x = np.asarray(values, dtype=np.float64)
    out = np.empty_like(x)
    if len(x) == 0:
        return out
    dts = _steps(times, len(x))
    inv_scale = 1.0 / max(float(scale), 1e-9)
    prev = x[0].copy()
    d_prev = np.zeros(x.shape[1], dtype=np.float64)
    out[0] = prev
    for t in range(1, len(x)):
        dt = float(dts[t - 1])
        a_d = _alpha(derivative_cutoff_hz, dt)
        d = a_d * (x[t] - prev) / dt + (1.0 - a_d) * d_prev
        speed = math.sqrt(float(np.mean(d * d))) * inv_scale
        a = _alpha(min_cutoff_hz + beta * speed, dt)
        prev = a * x[t] + (1.0 - a) * prev
        d_prev = d
        out[t] = prev
    return out


def smooth_track(
    values: np.ndarray,
    times: np.ndarray,
    scale: float,
    *,
    min_cutoff_hz: float,
    beta: float,
    derivative_cutoff_hz: float,
    pad_frames: int = 15,
) -> np.ndarray:
    """Zero-phase One-Euro smoothing of a dense (T, K) track series sampled at ``times``.

    The series is extended at both ends by odd reflection (``2*x[0] - x[k]``, and
    the same for the times), which continues a linear motion straight through the
    edge, so the first and last frames of a moving track are not pulled back;
    then filtered forward and backward.  Deterministic: the same input gives
    bit-identical output.
    """
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 2:
        raise ValueError(f"smooth_track: values must be (T, K), got {x.shape}")
    n = len(x)
    t = np.asarray(times, dtype=np.float64)
    _steps(t, n)
    if n < 3:
        return x.copy()
    p = min(pad_frames, n - 1)
    padded = np.concatenate([2.0 * x[0] - x[p:0:-1], x, 2.0 * x[-1] - x[-2 : -p - 2 : -1]])
    padded_t = np.concatenate([2.0 * t[0] - t[p:0:-1], t, 2.0 * t[-1] - t[-2 : -p - 2 : -1]])
    kw = {"min_cutoff_hz": min_cutoff_hz, "beta": beta, "derivative_cutoff_hz": derivative_cutoff_hz}
    fwd = one_euro(padded, padded_t, scale, **kw)
    # Backward in time: the reversed series with negated times (increasing again, same steps).
    both = one_euro(fwd[::-1], -padded_t[::-1], scale, **kw)[::-1]
    return both[p : p + n].copy()
