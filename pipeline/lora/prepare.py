"""Give a model LoRA slots: low-rank A/B weights on a parallel path, zero by default.

For every MatMul, Gemm or Conv whose weight initializer name matches a pattern the
rewritten graph computes ``y = W x + B(A x)``:

- MatMul ``x @ W`` (W of shape [K, N]): ``(x @ A) @ B`` with A [K, r], B [r, N].
- Gemm (``transA == 0``): ``alpha * (X @ A) @ B`` with A [K, r], B [r, N] whatever
  ``transB`` is (the merged weight is transposed back when ``transB`` is set).
- Conv (group 1): A is a Conv with ``r`` output channels and the weight's kernel,
  strides, pads, dilations and auto_pad; B is a 1x1 Conv from ``r`` to the
  output channels.  Grouped convolutions get no slot: their merged weight would
  not be grouped any more.

A and B are initializers that are also graph inputs ("overridable initializers"),
zero by default, so with no adapter active the model computes exactly what the
original did; ONNX Runtime adapters override them per run.  The original last
initializer stays last because inswapper consumers read ``emap`` from there.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Mapping
from typing import Any, Literal

import numpy as np
import onnx
from onnx import helper, numpy_helper

from pipeline.configbase import Frozen
from pipeline.errors import ModelPackError
from pipeline.limits import ONNX_MAX_BYTES
from pipeline.store import storage

log = logging.getLogger(__name__)

LoraOp = Literal["MatMul", "Gemm", "Conv"]
DEFAULT_PATTERN = ".*"
"""Weight-name regex (``re.search``) used when none is given: every supported weight."""


class LoraSlot(Frozen):
    """One weight tensor with a LoRA slot: the names and shapes of its A and B inputs."""

    weight: str
    op: LoraOp
    a: str
    b: str
    a_shape: tuple[int, ...]
    b_shape: tuple[int, ...]
    alpha: float = 1.0  # Gemm alpha: the parallel path is scaled like the main one
    trans_b: bool = False  # Gemm transB: the weight is stored [N, K]


class LoraSlots(Frozen):
    """What a prepared model offers adapters; stored as ``contract["lora"]`` in the pack manifest.

    ``base_sha256`` is the sha256 of the original (unprepared) model file: adapters
    carry a fingerprint of it as their model version.
    """

    rank: int
    base_sha256: str
    slots: tuple[LoraSlot, ...]

    def to_contract(self) -> dict[str, object]:
        """The JSON-able dict stored under ``contract["lora"]``."""
        return self.model_dump(mode="json")

    @classmethod
    def from_contract(cls, data: Mapping[str, object], where: str = "contract.lora") -> LoraSlots:
        """Parse ``contract["lora"]``; ModelPackError naming ``where`` if it is malformed."""
        try:
            return cls.model_validate(dict(data))
        except ValueError as exc:
            raise ModelPackError(where, f"invalid LoRA slot record: {exc}") from exc

    def parameter_shapes(self) -> dict[str, tuple[int, ...]]:
        """Name -> shape of every overridable LoRA tensor."""
        out: dict[str, tuple[int, ...]] = {}
        for slot in self.slots:
            out[slot.a] = slot.a_shape
            out[slot.b] = slot.b_shape
        return out


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _attrs(node: onnx.NodeProto) -> dict[str, Any]:
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _unique(name: str, taken: set[str]) -> str:
    out, i = name, 1
    while out in taken:
        out, i = f"{name}_{i}", i + 1
    taken.add(out)
    return out


def _slot_shapes(
    node: onnx.NodeProto, weight: np.ndarray, rank: int
) -> tuple[tuple[int, ...], tuple[int, ...], float, bool] | str:
    """(a_shape, b_shape, alpha, trans_b) for a supported node, else the reason it is skipped."""
    attrs = _attrs(node)
    if node.op_type == "MatMul":
        if weight.ndim != 2:
            return f"MatMul weight of rank {weight.ndim}"
        k, n = weight.shape
        return (k, rank), (rank, n), 1.0, False
    if node.op_type == "Gemm":
        if int(attrs.get("transA", 0)):
            return "Gemm with transA"
        trans_b = bool(int(attrs.get("transB", 0)))
        n, k = weight.shape if trans_b else weight.shape[::-1]
        return (k, rank), (rank, n), float(attrs.get("alpha", 1.0)), trans_b
    if node.op_type == "Conv":
        if int(attrs.get("group", 1)) != 1:
            return "grouped Conv"
        cout, cin, *kernel = weight.shape
        return (rank, cin, *kernel), (cout, rank, *([1] * len(kernel))), 1.0, False
    return f"unsupported op {node.op_type}"


def _parallel_nodes(
    node: onnx.NodeProto, slot: LoraSlot, base_out: str, out: str, taken: set[str], dtype: np.dtype
) -> tuple[list[onnx.NodeProto], list[onnx.TensorProto]]:
    """Nodes computing ``out = base_out + B(A x)`` for one consumer of a slotted weight."""
    x = node.input[0]
    tag = _unique(f"{node.name or slot.weight}.lora", taken)
    mid, delta = f"{tag}.ax", f"{tag}.bax"
    extra: list[onnx.TensorProto] = []
    if slot.op == "Conv":
        keep = {k: v for k, v in _attrs(node).items() if k in ("strides", "pads", "dilations", "auto_pad")}
        keep["kernel_shape"] = list(slot.a_shape[2:])
        nodes = [
            helper.make_node("Conv", [x, slot.a], [mid], name=f"{tag}.A", **keep),
            helper.make_node("Conv", [mid, slot.b], [delta], name=f"{tag}.B"),
        ]
    else:
        nodes = [
            helper.make_node("MatMul", [x, slot.a], [mid], name=f"{tag}.A"),
            helper.make_node("MatMul", [mid, slot.b], [delta], name=f"{tag}.B"),
        ]
        if slot.alpha != 1.0:
            scale = f"{tag}.alpha"
            extra.append(numpy_helper.from_array(np.array(slot.alpha, dtype=dtype), scale))
            scaled = f"{tag}.scaled"
            nodes.append(helper.make_node("Mul", [delta, scale], [scaled], name=f"{tag}.scale"))
            delta = scaled
    nodes.append(helper.make_node("Add", [base_out, delta], [out], name=f"{tag}.add"))
    return nodes, extra


SAMPLE_SIZE = 8


def _no_slot_message(
    model: onnx.ModelProto, pattern: str, regex: re.Pattern[str], refused: dict[str, str]
) -> str:
    """Why ``pattern`` gave no slot, with a short sample of the initializers that could take one."""
    inits = {t.name: t for t in model.graph.initializer}
    candidates: list[str] = []
    for node in model.graph.node:
        if node.op_type in ("MatMul", "Gemm", "Conv") and len(node.input) >= 2 and node.input[1] in inits:
            name = node.input[1]
            shape = "x".join(str(d) for d in inits[name].dims)
            if name not in refused and not isinstance(
                _slot_shapes(node, numpy_helper.to_array(inits[name]), 1), str
            ):
                candidates.append(f"{name} ({node.op_type} {shape})")
    candidates = list(dict.fromkeys(candidates))
    other = [n for n in inits if regex.search(n) and n not in refused]
    if refused:
        head = f"{pattern!r} matches only weights that cannot take a LoRA slot: " + ", ".join(
            f"{n} ({why})" for n, why in list(refused.items())[:SAMPLE_SIZE]
        )
    elif other:
        head = f"{pattern!r} matches no MatMul/Gemm/Conv weight, only other initializers: " + ", ".join(
            other[:SAMPLE_SIZE]
        )
    else:
        head = f"no MatMul/Gemm/Conv weight matches {pattern!r}"
    if not candidates:
        return f"{head}; the model has no MatMul, Gemm or Conv weight that can take a slot"
    more = f" ... ({len(candidates)} in all)" if len(candidates) > SAMPLE_SIZE else ""
    return f"{head}; weights that can take a slot include: {', '.join(candidates[:SAMPLE_SIZE])}{more}"


def prepare_model(
    model: onnx.ModelProto, *, rank: int, base_sha256: str, pattern: str = DEFAULT_PATTERN
) -> tuple[onnx.ModelProto, LoraSlots]:
    """A copy of ``model`` with LoRA slots on the weights whose name matches ``pattern``.

    ModelPackError if ``rank`` is not positive or no weight matched (a model with no
    slot would silently ignore every adapter).
    """
    if rank < 1:
        raise ModelPackError("lora.rank", f"rank must be >= 1, got {rank}")
    try:
        regex = re.compile(pattern)
    except re.error as exc:
        raise ModelPackError("--pattern", f"{pattern!r} is not a regular expression ({exc})") from exc
    out = onnx.ModelProto()
    out.CopyFrom(model)
    graph = out.graph
    inits = {t.name: t for t in graph.initializer}
    taken = {t.name for t in graph.initializer} | {i.name for i in graph.input}
    taken |= {o for n in graph.node for o in n.output} | {n.name for n in graph.node}

    slots: dict[str, LoraSlot] = {}
    refused: dict[str, str] = {}  # matched weights that cannot take a slot -> why
    new_inits: list[onnx.TensorProto] = []
    new_nodes: list[onnx.NodeProto] = []
    for node in graph.node:
        new_nodes.append(node)
        if node.op_type not in ("MatMul", "Gemm", "Conv") or len(node.input) < 2:
            continue
        wname = node.input[1]
        if wname not in inits or not regex.search(wname):
            continue
        weight = numpy_helper.to_array(inits[wname])
        if wname not in slots:
            shapes = _slot_shapes(node, weight, rank)
            if isinstance(shapes, str):
                log.info("no LoRA slot for %s: %s", wname, shapes)
                refused[wname] = shapes
                continue
            a_shape, b_shape, alpha, trans_b = shapes
            slot = LoraSlot(
                weight=wname,
                op=node.op_type,
                a=_unique(f"{wname}.lora_A", taken),
                b=_unique(f"{wname}.lora_B", taken),
                a_shape=a_shape,
                b_shape=b_shape,
                alpha=alpha,
                trans_b=trans_b,
            )
            slots[wname] = slot
            for name, shape in ((slot.a, a_shape), (slot.b, b_shape)):
                new_inits.append(numpy_helper.from_array(np.zeros(shape, dtype=weight.dtype), name))
                graph.input.append(
                    helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(weight.dtype), shape)
                )
        else:
            slot = slots[wname]
            if slot.op != node.op_type or _slot_shapes(node, weight, rank) != (
                slot.a_shape,
                slot.b_shape,
                slot.alpha,
                slot.trans_b,
            ):
                raise ModelPackError(wname, "weight is shared by nodes needing different LoRA slots")
        out_name = node.output[0]
        base_out = _unique(f"{out_name}.lora_base", taken)
        node.output[0] = base_out
        extra_nodes, extra_inits = _parallel_nodes(node, slot, base_out, out_name, taken, weight.dtype)
        new_nodes.extend(extra_nodes)
        new_inits.extend(extra_inits)

    if not slots:
        raise ModelPackError("--pattern", _no_slot_message(model, pattern, regex, refused))
    del graph.node[:]
    graph.node.extend(new_nodes)
    # Keep the original last initializer last (inswapper's emap is read from there).
    originals = list(graph.initializer)
    del graph.initializer[:]
    graph.initializer.extend(originals[:-1] + new_inits + originals[-1:])
    out.ir_version = max(out.ir_version, 4)  # initializers that are also inputs are overridable from IR 4
    onnx.checker.check_model(out)
    record = LoraSlots(rank=rank, base_sha256=base_sha256, slots=tuple(slots.values()))
    log.info("prepared %d LoRA slots of rank %d", len(record.slots), rank)
    return out, record


def prepare_file(src_url: str, dest_url: str, *, rank: int, pattern: str = DEFAULT_PATTERN) -> LoraSlots:
    """Prepare the model at ``src_url`` and publish it to ``dest_url``; returns its slot record."""
    data = storage.read_bytes(src_url, max_bytes=ONNX_MAX_BYTES)
    try:
        model = onnx.load_model_from_string(data)
    except Exception as exc:  # any parse failure means a bad model file
        raise ModelPackError(src_url, f"not an ONNX model ({exc})") from exc
    prepared, record = prepare_model(model, rank=rank, base_sha256=sha256_bytes(data), pattern=pattern)
    storage.write_bytes(dest_url, prepared.SerializeToString())
    return record


def merge_adapter(
    original: onnx.ModelProto, slots: LoraSlots, params: Mapping[str, np.ndarray]
) -> onnx.ModelProto:
    """A copy of the ORIGINAL (unprepared) model with ``W += A @ B`` baked into each slotted weight.

    The reference an adapter run must match; also a way to ship a merged model.
    """
    out = onnx.ModelProto()
    out.CopyFrom(original)
    by_name = {t.name: t for t in out.graph.initializer}
    for slot in slots.slots:
        a = np.asarray(params[slot.a], dtype=np.float64)
        b = np.asarray(params[slot.b], dtype=np.float64)
        tensor = by_name[slot.weight]
        weight = numpy_helper.to_array(tensor)
        if slot.op == "Conv":
            delta = np.einsum("or,ri...->oi...", b.reshape(b.shape[0], b.shape[1]), a)
        else:
            delta = a @ b  # Gemm scales W by alpha itself, as it does the parallel path
            if slot.trans_b:
                delta = delta.T
        merged = (weight.astype(np.float64) + delta).astype(weight.dtype)
        tensor.CopyFrom(numpy_helper.from_array(merged, slot.weight))
    return out
