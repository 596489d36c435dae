"""A model's input made free in height and width, so a detector exported at one size runs at others.

Detector exports often fix their input (YuNet 2023mar: ``[N, 3, 640, 640]``) although
the graph is convolutional all the way and would run at any multiple of its largest
stride.  :func:`free_input_size` rewrites the declared shapes in memory (nothing is
written to the pack): the input's height and width, and every output dimension but a
leading batch, become symbolic, and the inferred shapes (``value_info``, valid at the
exported size only) are dropped.  Whether the graph really follows its input is then
found by running it, never assumed: :func:`outputs_follow_size` runs it at both sizes
(a ``Reshape`` to a constant cell count fails at another size, or gives outputs that
do not scale with the input's area), and :func:`same_outputs` compares it with the
original session at the exported size on a real picture.
"""

from __future__ import annotations

import numpy as np
import onnx

from pipeline.models.runtime.protocols import Runner
from pipeline.models.runtime.rewrites import PROTOBUF_LIMIT_BYTES

SAME_RTOL = 1e-4
SAME_ATOL = 1e-4
"""The rewritten graph at the exported size must give the original's outputs within these
(``np.allclose``): the same arithmetic, up to float32 rounding of a different kernel choice."""


def free_input_size(path: str) -> tuple[bytes | None, str]:
    """The model at ``path`` with a symbolic input height and width, serialised, and "";
    or None and why it cannot be rewritten."""
    from google.protobuf.message import DecodeError

    try:
        model = onnx.load(path)
    except (OSError, DecodeError, ValueError) as exc:
        return None, f"cannot read it ({type(exc).__name__}: {exc})"
    weights = {t.name for t in model.graph.initializer}
    inputs = [i for i in model.graph.input if i.name not in weights]
    if len(inputs) != 1:
        return None, f"it has {len(inputs)} inputs, not one image"
    dims = inputs[0].type.tensor_type.shape.dim
    if len(dims) != 4:
        return None, f"its input {inputs[0].name} has {len(dims)} dimensions, not N, C, H, W"
    for dim, name in zip(dims[2:], ("height", "width")):
        dim.Clear()
        dim.dim_param = name
    for output in model.graph.output:
        out_dims = output.type.tensor_type.shape.dim
        for k, dim in enumerate(out_dims):
            if k == 0 and len(out_dims) >= 3:
                continue  # the batch
            dim.Clear()
            dim.dim_param = f"{output.name}_{k}"
    del model.graph.value_info[:]
    if model.ByteSize() >= PROTOBUF_LIMIT_BYTES:
        return None, "the graph is over protobuf's 2 GB limit"
    return model.SerializeToString(), ""


MESSAGE_CHARS = 300
"""ONNX Runtime's messages are long; this much of one says what failed."""


def _run_at(runner: Runner, feed: np.ndarray) -> list[np.ndarray]:
    """The outputs on ``feed``; ONNX Runtime's own log of a failing node is muted (the
    exception says the same, and a graph that fails here is not an error)."""
    options = None
    if runner.accepts_run_options:
        import onnxruntime as ort

        options = ort.RunOptions()
        options.log_severity_level = 4  # fatal only
    return runner.run({runner.input_names[0]: feed}, options)


def _first_line(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    line = f"{type(exc).__name__}: {text[0] if text else ''}"
    return line if len(line) <= MESSAGE_CHARS else line[: MESSAGE_CHARS - 3] + "..."


def outputs_follow_size(runner: Runner, base: tuple[int, int], size: tuple[int, int]) -> str | None:
    """None if ``runner`` runs at ``size`` (width, height) with every output's element count
    scaled by the input's area from ``base``; otherwise what goes wrong."""
    if len(runner.input_names) != 1:
        return f"it has {len(runner.input_names)} inputs, not one image"
    found = []
    for w, h in (base, size):
        try:
            found.append(_run_at(runner, np.zeros((1, 3, h, w), np.float32)))
        except Exception as exc:  # noqa: BLE001 - any failure means: this graph keeps its size
            return f"it does not run at {w}x{h} ({_first_line(exc)})"
    ratio = size[0] * size[1] / (base[0] * base[1])
    for name, at_base, at_size in zip(runner.output_names, *found):
        if at_size.size != round(at_base.size * ratio):
            return (
                f"its output {name} is {list(at_size.shape)} at {size[0]}x{size[1]} and "
                f"{list(at_base.shape)} at {base[0]}x{base[1]}: it does not follow the input's size"
            )
    return None


def same_outputs(original: Runner, rewritten: Runner, feed: np.ndarray) -> str | None:
    """None if both runners give the same outputs on ``feed`` (within :data:`SAME_RTOL` /
    :data:`SAME_ATOL`); otherwise the first output that differs and by how much."""
    try:
        expected, got = _run_at(original, feed), _run_at(rewritten, feed)
    except Exception as exc:  # noqa: BLE001 - any failure means: this graph keeps its size
        return f"the rewritten graph does not run at the exported size ({_first_line(exc)})"
    for name, a, b in zip(original.output_names, expected, got):
        if a.shape != b.shape or not np.allclose(a, b, rtol=SAME_RTOL, atol=SAME_ATOL):
            diff = float(np.abs(a - b).max()) if a.shape == b.shape else float("inf")
            return f"the rewritten graph's output {name} differs from the original's by {diff:.3g}"
    return None
