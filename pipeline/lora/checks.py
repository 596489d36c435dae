"""Checks that a prepared model still computes what the original did with no adapter active.

A zero-initialised LoRA slot adds exact zeros, but it changes how ONNX Runtime
fuses and orders the arithmetic around the slotted node, so outputs differ by
an ulp or so.  The check therefore allows a difference of ``RELATIVE_TOLERANCE``
times the range of the original output, measured on several random inputs; a
real change (a slot that is not zero, a rewired node) is orders of magnitude
above that.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnxruntime as ort

from pipeline.errors import ModelPackError

RELATIVE_TOLERANCE = 1e-5
"""Largest allowed max |difference| as a fraction of the original output's range (max - min)."""
SEEDS = (0, 1, 2, 3)


@dataclass(frozen=True)
class UnchangedReport:
    """What :func:`check_unchanged` measured: the worst max |difference| over all inputs."""

    max_abs_difference: float
    output_range: float  # range of the original output where the worst relative difference was seen
    relative_difference: float  # max_abs_difference / output_range
    inputs: int  # random inputs tried

    def describe(self) -> str:
        return (
            f"max |difference| {self.max_abs_difference:.3g} = {self.relative_difference:.3g} x the output's "
            f"range {self.output_range:.3g} over {self.inputs} random inputs (limit {RELATIVE_TOLERANCE:g})"
        )


def _session(model: bytes, where: str) -> ort.InferenceSession:
    opts = ort.SessionOptions()
    opts.log_severity_level = 3  # "initializer is also a graph input" is expected for LoRA slots
    try:
        return ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])
    except Exception as exc:  # ORT raises its own exception types for bad graphs
        raise ModelPackError(where, f"ONNX Runtime cannot load the model ({exc})") from exc


def _feeds(session: ort.InferenceSession, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    feeds = {}
    for i in session.get_inputs():
        shape = [d if isinstance(d, int) and d > 0 else 1 for d in i.shape]
        feeds[i.name] = rng.random(shape, dtype=np.float32)
    return feeds


def check_unchanged(original: bytes, prepared: bytes, where: str) -> UnchangedReport:
    """Compare both models on ``len(SEEDS)`` random inputs; ModelPackError if they differ.

    Every output of every run must satisfy ``max |prepared - original| <=
    RELATIVE_TOLERANCE * (max(original) - min(original))`` (a constant output is
    measured against its magnitude, or 1).
    """
    a, b = _session(original, where), _session(prepared, where)
    worst = UnchangedReport(0.0, 0.0, 0.0, len(SEEDS))
    for seed in SEEDS:
        feeds = _feeds(a, seed)
        for x, y in zip(a.run(None, feeds), b.run(None, feeds), strict=True):
            x64, y64 = np.asarray(x, np.float64), np.asarray(y, np.float64)
            if x64.shape != y64.shape:
                raise ModelPackError(
                    where,
                    f"prepared model's output has shape {list(y64.shape)}, the original's {list(x64.shape)}",
                )
            diff = float(np.max(np.abs(x64 - y64))) if x64.size else 0.0
            span = float(np.ptp(x64)) if x64.size else 0.0
            if span == 0.0:
                span = max(float(np.max(np.abs(x64))) if x64.size else 0.0, 1.0)
            relative = diff / span if np.isfinite(diff) else float("inf")
            if relative >= worst.relative_difference:
                worst = UnchangedReport(diff, span, relative, len(SEEDS))
    if not worst.relative_difference <= RELATIVE_TOLERANCE:
        raise ModelPackError(
            where, f"prepared model's output differs from the original's with no adapter: {worst.describe()}"
        )
    return worst
