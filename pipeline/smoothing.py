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


def _alpha(cutoff_per_frame: float) -> float:
    # Exponential smoothing factor for a first-order low-pass at this cutoff, one frame per step.
    tau = 1.0 / (2.0 * math.pi * cutoff_per_frame)
    return 1.0 / (1.0 + tau)


def one_euro(
    values: np.ndarray, scale: float, *, min_cutoff: float, beta: float, derivative_cutoff: float
) -> np.ndarray:
    """Causal One-Euro filter over a (T, K) series sampled once per frame.

    The speed driving the cutoff is the RMS over the K coordinates of the
    filtered per-frame change, divided by ``scale`` (e.g. the face size in
    pixels), so ``beta`` does not depend on resolution.
    """
    x = np.asarray(values, dtype=np.float64)
    out = np.empty_like(x)
    if len(x) == 0:
        return out
    a_d = _alpha(derivative_cutoff)
    inv_scale = 1.0 / max(float(scale), 1e-9)
    prev = x[0].copy()
    d_prev = np.zeros(x.shape[1], dtype=np.float64)
    out[0] = prev
    for t in range(1, len(x)):
        d = a_d * (x[t] - prev) + (1.0 - a_d) * d_prev
        speed = math.sqrt(float(np.mean(d * d))) * inv_scale
        a = _alpha(min_cutoff + beta * speed)
        prev = a * x[t] + (1.0 - a) * prev
        d_prev = d
        out[t] = prev
    return out


def smooth_track(
    values: np.ndarray,
    scale: float,
    *,
    min_cutoff: float,
    beta: float,
    derivative_cutoff: float,
    pad_frames: int = 15,
) -> np.ndarray:
    """Zero-phase One-Euro smoothing of a dense (T, K) track series.

    The series is extended at both ends by odd reflection (``2*x[0] - x[k]``),
    which continues a linear motion straight through the edge, so the first and
    last frames of a moving track are not pulled back; then filtered forward
    and backward.  Deterministic: the same input gives bit-identical output.
    """
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 2:
        raise ValueError(f"smooth_track: values must be (T, K), got {x.shape}")
    n = len(x)
    if n < 3:
        return x.copy()
    p = min(pad_frames, n - 1)
    head = 2.0 * x[0] - x[p:0:-1]
    tail = 2.0 * x[-1] - x[-2 : -p - 2 : -1]
    padded = np.concatenate([head, x, tail])
    kw = {"min_cutoff": min_cutoff, "beta": beta, "derivative_cutoff": derivative_cutoff}
    fwd = one_euro(padded, scale, **kw)
    both = one_euro(fwd[::-1], scale, **kw)[::-1]
    return both[p : p + n].copy()
