"""Temporal filters for face tracks: gap interpolation and zero-phase One-Euro smoothing.

The plan is built with the whole shot in hand, so the smoother may look ahead:
a One-Euro filter (Casiez et al. 2012: an exponential smoother whose cutoff
rises with speed) is run forward and then backward over each track.  The
backward pass cancels the forward pass's lag, so real motion is not delayed,
while still faces get two passes of low-pass filtering against detector jitter.
One cutoff is shared by every coordinate of a face at a given frame, so the
five landmarks move together and the face shape is not distorted.

The filter is a recursion in time, but independent across tracks: every
track (and gap-free segment) of a shot is filtered in one pass over time
whose steps are array operations over all the series still running
(:func:`smooth_tracks`), with the same float64 operations, in the same order,
as a series filtered alone, so the result is bit-identical.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

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


def _alpha(cutoff_hz: float | np.ndarray, dt: np.ndarray) -> np.ndarray:
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


@dataclass(frozen=True)
class OneEuro:
    """The One-Euro filter's settings (see :func:`one_euro`)."""

    min_cutoff_hz: float
    beta: float
    derivative_cutoff_hz: float


def _one_euro_many(
    series: Sequence[np.ndarray], times: Sequence[np.ndarray], scales: Sequence[float], f: OneEuro
) -> list[np.ndarray]:
    """:func:`one_euro` of several (T_i, K) series at once (same K): one step over all at a time.

    The series are sorted longest first, so those still running at step ``t`` are a
    prefix of the batch and every step works on slices; each row sees exactly the
    operations of :func:`one_euro` on that series alone.
    """
    out: list[np.ndarray] = [np.empty((0, 0))] * len(series)
    todo = [i for i, x in enumerate(series) if len(x)]
    for i, x in enumerate(series):
        if not len(x):
            out[i] = np.empty_like(x)
    if not todo:
        return out
    todo.sort(key=lambda i: -len(series[i]))
    lengths = np.array([len(series[i]) for i in todo])
    b, longest, k = len(todo), int(lengths[0]), series[todo[0]].shape[1]
    x = np.zeros((b, longest, k), dtype=np.float64)
    dts = np.ones((b, max(longest - 1, 0)), dtype=np.float64)
    for row, i in enumerate(todo):
        x[row, : lengths[row]] = series[i]
        dts[row, : lengths[row] - 1] = _steps(times[i], int(lengths[row]))
    inv_scale = np.array([1.0 / max(float(scales[i]), 1e-9) for i in todo])
    # Time-major, so each step reads and writes contiguous rows.
    xt = np.ascontiguousarray(x.transpose(1, 0, 2))  # (T, B, K)
    dtt = np.ascontiguousarray(dts.T)  # (T - 1, B)
    a_d = _alpha(f.derivative_cutoff_hz, dtt)[:, :, None]
    one_minus_a_d = 1.0 - a_d
    dt3 = dtt[:, :, None]
    two_pi = 2.0 * math.pi
    running = np.searchsorted(-lengths, -np.arange(longest), side="left")  # rows with length > t
    y = np.empty_like(xt)
    y[0] = xt[0]
    d_prev = np.zeros((b, k), dtype=np.float64)
    for t in range(1, longest):
        n = int(running[t])
        prev = y[t - 1, :n]
        d = a_d[t - 1, :n] * (xt[t, :n] - prev) / dt3[t - 1, :n] + one_minus_a_d[t - 1, :n] * d_prev[:n]
        # ``np.mean`` over the coordinates is this sum divided by their number.
        if n == 1:  # one series left (or the only one): the same arithmetic in plain floats is cheaper
            speed1 = math.sqrt(float(np.add.reduce(d[0] * d[0])) / k) * float(inv_scale[0])
            a1 = 1.0 / (1.0 + (1.0 / (two_pi * (f.min_cutoff_hz + f.beta * speed1))) / float(dtt[t - 1, 0]))
            y[t, :1] = a1 * xt[t, :1] + (1.0 - a1) * prev
        else:
            speed = np.sqrt(np.add.reduce(d * d, axis=1) / k) * inv_scale[:n]
            # _alpha(min_cutoff_hz + beta * speed, dt), written out.
            a = (1.0 / (1.0 + (1.0 / (two_pi * (f.min_cutoff_hz + f.beta * speed))) / dtt[t - 1, :n]))[
                :, None
            ]
            y[t, :n] = a * xt[t, :n] + (1.0 - a) * prev
        d_prev[:n] = d
    for row, i in enumerate(todo):
        out[i] = y[: lengths[row], row].copy()
    return out


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
    if len(x) == 0:
        return np.empty_like(x)
    f = OneEuro(min_cutoff_hz=min_cutoff_hz, beta=beta, derivative_cutoff_hz=derivative_cutoff_hz)
    return _one_euro_many([x], [np.asarray(times, dtype=np.float64)], [scale], f)[0]


def smooth_tracks(
    series: Sequence[tuple[np.ndarray, np.ndarray, float]], f: OneEuro, *, pad_frames: int = 15
) -> list[np.ndarray]:
    """:func:`smooth_track` of many ``(values, times, scale)`` series at once, bit-identical to one by one.

    The forward and the backward pass each run once over time for all the series
    that have the same number of coordinates.
    """
    out: list[np.ndarray] = []
    padded: dict[int, list[tuple[int, int, np.ndarray, np.ndarray, float]]] = {}
    for i, (values, times, scale) in enumerate(series):
        x = np.asarray(values, dtype=np.float64)
        if x.ndim != 2:
            raise ValueError(f"smooth_track: values must be (T, K), got {x.shape}")
        n = len(x)
        t = np.asarray(times, dtype=np.float64)
        _steps(t, n)
        out.append(x.copy())
        if n < 3:
            continue
        p = min(pad_frames, n - 1)
        px = np.concatenate([2.0 * x[0] - x[p:0:-1], x, 2.0 * x[-1] - x[-2 : -p - 2 : -1]])
        pt = np.concatenate([2.0 * t[0] - t[p:0:-1], t, 2.0 * t[-1] - t[-2 : -p - 2 : -1]])
        padded.setdefault(x.shape[1], []).append((i, p, px, pt, scale))
    for group in padded.values():
        scales = [scale for *_, scale in group]
        fwd = _one_euro_many([px for _, _, px, _, _ in group], [pt for _, _, _, pt, _ in group], scales, f)
        # Backward in time: the reversed series with negated times (increasing again, same steps).
        back = _one_euro_many([y[::-1] for y in fwd], [-pt[::-1] for _, _, _, pt, _ in group], scales, f)
        for (i, p, *_), y in zip(group, back, strict=True):
            out[i] = y[::-1][p : p + len(out[i])].copy()
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
    f = OneEuro(min_cutoff_hz=min_cutoff_hz, beta=beta, derivative_cutoff_hz=derivative_cutoff_hz)
    return smooth_tracks([(values, times, scale)], f, pad_frames=pad_frames)[0]
