"""Fixed batch dimensions in exported models, and how training gets around them.

Swappers exported by other tools (the studio's inswapper_128 among them) often
fix the batch at 1: on the graph inputs, and in shape constants such as a
``Reshape`` of the style vector to ``[1, C, 1, 1]``.  Training batches several
crops through the graph, so :func:`dynamic_batch` rewrites those pins (inputs
and outputs to a symbolic ``batch``, a Reshape's leading 1 to -1, or to 0 when
the shape already has a -1), and :func:`batch_works` checks the result in ONNX
Runtime: the same outputs as the original at batch 1, and a batch of 2 equal to
two single calls.  When it does not hold, training falls back to one crop per
call with gradient accumulation.
"""

from __future__ import annotations

import logging

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

from pipeline.lora.checks import RELATIVE_TOLERANCE

log = logging.getLogger(__name__)

BATCH_DIM = "batch"


def _pin_batch(value: onnx.ValueInfoProto) -> bool:
    """Make the leading dim of a declared tensor symbolic if it is a fixed 1; True if changed."""
    dims = value.type.tensor_type.shape.dim
    if len(dims) and dims[0].HasField("dim_value") and dims[0].dim_value == 1:
        dims[0].ClearField("dim_value")
        dims[0].dim_param = BATCH_DIM
        return True
    return False


def _shape_constants(graph: onnx.GraphProto) -> dict[str, np.ndarray]:
    """Name -> value of int64 initializers and Constant-node outputs (candidate shape inputs)."""
    out = {
        t.name: numpy_helper.to_array(t) for t in graph.initializer if t.data_type == onnx.TensorProto.INT64
    }
    for node in graph.node:
        if node.op_type == "Constant" and node.attribute and node.attribute[0].name == "value":
            value = numpy_helper.to_array(node.attribute[0].t)
            if value.dtype == np.int64:
                out[node.output[0]] = value
    return out


def dynamic_batch(model: onnx.ModelProto) -> tuple[onnx.ModelProto, list[str]]:
    """A copy of ``model`` whose batch is not pinned to 1, and a description of each change.

    Graph inputs that are initializers (weights, LoRA slots) are left alone.  Each
    rewritten Reshape gets its own new shape initializer, so a constant shared with
    other nodes keeps its value for them.  Declared intermediate shapes
    (``value_info``) are dropped: they are hints and would contradict a new batch.
    """
    out = onnx.ModelProto()
    out.CopyFrom(model)
    graph = out.graph
    changes: list[str] = []
    initializers = {t.name for t in graph.initializer}
    for value in list(graph.input) + list(graph.output):
        if value.name not in initializers and _pin_batch(value):
            changes.append(f"{value.name}: batch 1 -> dynamic")
    del graph.value_info[:]
    constants = _shape_constants(graph)
    taken = set(initializers) | {o for n in graph.node for o in n.output}
    for index, node in enumerate(graph.node):
        if node.op_type != "Reshape" or len(node.input) < 2 or node.input[1] not in constants:
            continue
        shape = constants[node.input[1]]
        if shape.ndim != 1 or not len(shape) or shape[0] != 1:
            continue
        allowzero = any(a.name == "allowzero" and a.i for a in node.attribute)
        new = shape.copy()
        if -1 not in shape:
            new[0] = -1
        elif not allowzero:
            new[0] = 0  # copy the input's leading dim
        else:
            log.info("Reshape %s pins batch 1 but has a -1 and allowzero: left as is", node.name)
            continue
        name, i = f"{node.input[1]}.dynamic_batch", 1
        while name in taken:
            name, i = f"{node.input[1]}.dynamic_batch{i}", i + 1
        taken.add(name)
        graph.initializer.insert(0, numpy_helper.from_array(new.astype(np.int64), name))
        node.input[1] = name
        changes.append(f"Reshape {node.name or index} ({shape.tolist()} -> {new.tolist()})")
    # Keep the original last initializer last (inswapper reads its emap from there).
    return out, changes


def _session(model: onnx.ModelProto) -> ort.InferenceSession:
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    return ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])


def _feeds(session: ort.InferenceSession, batch: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    feeds = {}
    for i in session.get_inputs():
        shape = [d if isinstance(d, int) and d > 0 else 1 for d in i.shape]
        feeds[i.name] = rng.random([batch, *shape[1:]], dtype=np.float32)
    return feeds


def _close(x: np.ndarray, y: np.ndarray) -> bool:
    span = max(float(np.ptp(x)), 1e-12)
    return x.shape == y.shape and float(np.max(np.abs(x - y))) <= RELATIVE_TOLERANCE * span


def batch_works(original: onnx.ModelProto, rewritten: onnx.ModelProto) -> str | None:
    """None if ``rewritten`` matches ``original`` at batch 1 and runs a batch of 2 as two single
    calls would; else why not (ONNX Runtime, random inputs)."""
    quiet = ort.RunOptions()
    quiet.log_severity_level = 4  # a failure at batch 2 is an answer here, not an error to log
    try:
        base, dyn = _session(original), _session(rewritten)
        pair = _feeds(dyn, 2, 0)
        singles = [base.run(None, {k: v[i : i + 1] for k, v in pair.items()}) for i in range(2)]
        for i in range(2):
            one = dyn.run(None, {k: v[i : i + 1] for k, v in pair.items()})
            if not all(_close(a, b) for a, b in zip(singles[i], one, strict=True)):
                return "the rewritten model's outputs at batch 1 differ from the original's"
        both = dyn.run(None, pair, quiet)
    except Exception as exc:  # noqa: BLE001 - any ORT failure at batch 2 means: train one crop per call
        return f"ONNX Runtime cannot run it at batch 2 ({str(exc).splitlines()[0]})"
    for k, out in enumerate(both):
        if not _close(np.concatenate([s[k] for s in singles]), out):
            return "a batch of 2 does not give the outputs of two single calls"
    return None
