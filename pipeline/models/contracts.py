"""Input/output contracts of each model kind, checked before any session is made.

A pack entry declares a role and a kind; the kind fixes the tensors its class
feeds and reads (names where the class feeds by name, ranks, fixed sizes).  A
model file whose graph does not fit is rejected here with a
:class:`ModelPackError` naming the file and the tensor that is wrong, so a
studio finds a mislabelled file at load time instead of mid-shot.

Shapes are compared dimension by dimension: ``None`` in an expected shape
means "any size", and a symbolic (dynamic) dimension in the model matches any
expected size, because a dynamic model runs at the contract's size.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import onnx

from pipeline.errors import ModelPackError

ROLE_KINDS: Mapping[str, tuple[str, ...]] = {
    "detector": ("scrfd", "yunet", "retinaface"),
    "recognizer": ("arcface", "sface"),
    "swapper": ("inswapper", "builtin"),
    "enhancer": ("gfpgan",),
    "occluder": ("xseg",),
}
"""Kinds accepted for each role; the role class is chosen by kind."""

FILELESS_KINDS: frozenset[str] = frozenset({"builtin"})
"""Kinds that need no model file (and so no sha256)."""

REQUIRED_ROLES: tuple[str, ...] = ("detector", "recognizer", "swapper")

Dim = int | None
"""A tensor dimension: a fixed size, or None when the graph leaves it dynamic."""


@dataclass(frozen=True)
class TensorSpec:
    """Name and shape of one graph input or output (``None`` = dynamic dimension)."""

    name: str
    shape: tuple[Dim, ...]


@dataclass(frozen=True)
class GraphIO:
    """What a contract check needs to know about an ONNX graph."""

    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    last_initializer_shape: tuple[int, ...] | None


def _dims(value: onnx.ValueInfoProto) -> tuple[Dim, ...]:
    dims = value.type.tensor_type.shape.dim
    return tuple(int(d.dim_value) if d.HasField("dim_value") and d.dim_value > 0 else None for d in dims)


def read_graph_io(path: str, where: str | None = None) -> GraphIO:
    """Inputs, outputs and the last initializer's shape of the ONNX file at ``path``.

    Graph inputs that are also initializers (old exporters list weights as
    inputs) are not real inputs and are left out.
    """
    try:
        model = onnx.load(path, load_external_data=False)
    except Exception as exc:
        raise ModelPackError(
            where or path, f"not a readable ONNX model ({type(exc).__name__}: {exc})"
        ) from exc
    graph = model.graph
    init_names = {init.name for init in graph.initializer}
    inputs = tuple(TensorSpec(v.name, _dims(v)) for v in graph.input if v.name not in init_names)
    outputs = tuple(TensorSpec(v.name, _dims(v)) for v in graph.output)
    last = tuple(int(d) for d in graph.initializer[-1].dims) if len(graph.initializer) else None
    return GraphIO(inputs=inputs, outputs=outputs, last_initializer_shape=last)


def format_shape(shape: Sequence[Dim]) -> str:
    return "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"


def shape_matches(actual: Sequence[Dim], expected: Sequence[Dim]) -> bool:
    """True if ``actual`` has the expected rank and every fixed dimension agrees."""
    if len(actual) != len(expected):
        return False
    return all(a is None or e is None or a == e for a, e in zip(actual, expected, strict=True))


def contract_size(contract: Mapping[str, Any], default: tuple[int, int], where: str) -> tuple[int, int]:
    """The ``input_size`` [width, height] of a contract, validated."""
    value = contract.get("input_size", list(default))
    if (
        not isinstance(value, (list, tuple))
        or len(value) != 2
        or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in value)
    ):
        raise ModelPackError(
            where, f"contract.input_size must be two positive integers [width, height], got {value!r}"
        )
    return int(value[0]), int(value[1])


def contract_fraction(contract: Mapping[str, Any], key: str, default: float, where: str) -> float:
    """A contract value that must lie in [0, 1] (thresholds, blend)."""
    value = contract.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= float(value) <= 1.0:
        raise ModelPackError(where, f"contract.{key} must be a number in [0, 1], got {value!r}")
    return float(value)


class _Check:
    """Collects the contract violations of one file and raises them together."""

    def __init__(self, where: str, kind: str, io: GraphIO) -> None:
        self.where = where
        self.kind = kind
        self.io = io
        self.problems: list[str] = []

    def count(self, what: str, tensors: Sequence[TensorSpec], expected: int) -> bool:
        if len(tensors) != expected:
            names = ", ".join(f"{t.name} {format_shape(t.shape)}" for t in tensors)
            self.problems.append(f"has {len(tensors)} {what} ({names}), kind {self.kind} needs {expected}")
            return False
        return True

    def shape(self, what: str, tensor: TensorSpec, expected: Sequence[Dim]) -> None:
        if not shape_matches(tensor.shape, expected):
            self.problems.append(
                f"{what} '{tensor.name}' has shape {format_shape(tensor.shape)}, "
                f"kind {self.kind} needs {format_shape(expected).replace('?', 'N', 1)}"
            )

    def named_input(self, name: str) -> TensorSpec | None:
        for tensor in self.io.inputs:
            if tensor.name == name:
                return tensor
        found = ", ".join(f"'{t.name}'" for t in self.io.inputs)
        self.problems.append(f"has no input named '{name}' (inputs: {found}), kind {self.kind} needs it")
        return None

    def done(self) -> None:
        if self.problems:
            raise ModelPackError(self.where, "; ".join(self.problems))


def _check_scrfd(c: _Check, contract: Mapping[str, Any]) -> None:
    w, h = contract_size(contract, (640, 640), c.where)
    contract_fraction(contract, "score_threshold", 0.5, c.where)
    contract_fraction(contract, "nms_threshold", 0.4, c.where)
    if c.count("inputs", c.io.inputs, 1):
        c.shape("input", c.io.inputs[0], (None, 3, h, w))
    # 3 strides x (scores, boxes, 5 keypoints); the 6-output variants have no
    # keypoints, and alignment needs them.
    if c.count("outputs", c.io.outputs, 9):
        for group, last in ((0, 1), (1, 4), (2, 10)):
            for out in c.io.outputs[group * 3 : group * 3 + 3]:
                rank_ok = len(out.shape) in (2, 3)
                if not rank_ok or (out.shape[-1] is not None and out.shape[-1] != last):
                    c.problems.append(
                        f"output '{out.name}' has shape {format_shape(out.shape)}, "
                        f"kind scrfd needs [anchors, {last}] or [N, anchors, {last}] there"
                    )


def _check_arcface(c: _Check, contract: Mapping[str, Any]) -> None:
    w, h = contract_size(contract, (112, 112), c.where)
    dim = int(contract.get("embedding_dim", 512))
    if c.count("inputs", c.io.inputs, 1):
        c.shape("input", c.io.inputs[0], (None, 3, h, w))
    if c.count("outputs", c.io.outputs, 1):
        c.shape("output", c.io.outputs[0], (None, dim))


def _check_inswapper(c: _Check, contract: Mapping[str, Any]) -> None:
    w, h = contract_size(contract, (128, 128), c.where)
    if c.count("inputs", c.io.inputs, 2):
        target = c.named_input("target")
        source = c.named_input("source")
        if target is not None:
            c.shape("input", target, (None, 3, h, w))
        if source is not None:
            c.shape("input", source, (None, 512))
    if c.count("outputs", c.io.outputs, 1):
        c.shape("output", c.io.outputs[0], (None, 3, h, w))
    if c.io.last_initializer_shape != (512, 512):
        c.problems.append(
            f"last initializer has shape {list(c.io.last_initializer_shape or ())}, "
            "kind inswapper keeps its 512x512 'emap' there"
        )


def _check_gfpgan(c: _Check, contract: Mapping[str, Any]) -> None:
    w, h = contract_size(contract, (512, 512), c.where)
    contract_fraction(contract, "blend", 0.8, c.where)
    if c.count("inputs", c.io.inputs, 1):
        c.shape("input", c.io.inputs[0], (None, 3, h, w))
    if c.count("outputs", c.io.outputs, 1):
        c.shape("output", c.io.outputs[0], (None, 3, h, w))


def _check_xseg(c: _Check, contract: Mapping[str, Any]) -> None:
    w, h = contract_size(contract, (256, 256), c.where)
    if c.count("inputs", c.io.inputs, 1):
        c.shape("input", c.io.inputs[0], (None, h, w, 3))
    if c.count("outputs", c.io.outputs, 1):
        c.shape("output", c.io.outputs[0], (None, h, w, 1))


def _check_image_model(c: _Check, contract: Mapping[str, Any]) -> None:
    """Models of the embedded pack (yunet, sface, retinaface): their classes own
    the details; here only "one 3-channel image input, some outputs"."""
    if "input_size" in contract:
        contract_size(contract, (1, 1), c.where)
    if c.count("inputs", c.io.inputs, 1):
        shape = c.io.inputs[0].shape
        if len(shape) != 4 or 3 not in (shape[1], shape[3]) and None not in (shape[1], shape[3]):
            c.problems.append(
                f"input '{c.io.inputs[0].name}' has shape {format_shape(shape)}, "
                f"kind {c.kind} needs a 4-d image tensor with 3 channels"
            )
    if not c.io.outputs:
        c.problems.append("has no outputs")


_CHECKS: Mapping[str, Callable[[_Check, Mapping[str, Any]], None]] = {
    "scrfd": _check_scrfd,
    "arcface": _check_arcface,
    "inswapper": _check_inswapper,
    "gfpgan": _check_gfpgan,
    "xseg": _check_xseg,
    "yunet": _check_image_model,
    "sface": _check_image_model,
    "retinaface": _check_image_model,
}


def check_role_kind(role: str, kind: str, where: str) -> None:
    """Raise unless ``kind`` is a kind accepted for ``role``."""
    kinds = ROLE_KINDS.get(role)
    if kinds is None:
        raise ModelPackError(where, f"unknown role {role!r}; roles are {', '.join(ROLE_KINDS)}")
    if kind not in kinds:
        raise ModelPackError(
            where, f"kind {kind!r} is not a {role} kind; {role} kinds are {', '.join(kinds)}"
        )


def check_model_contract(
    kind: str, path: str, contract: Mapping[str, Any], where: str | None = None
) -> GraphIO:
    """Raise :class:`ModelPackError` unless the ONNX file at ``path`` fits ``kind``.

    ``where`` names the file in messages (defaults to ``path``); returns the
    graph's inputs and outputs for callers that want them.
    """
    where = where or path
    check = _CHECKS.get(kind)
    if check is None:
        raise ModelPackError(where, f"no contract known for kind {kind!r}")
    io = read_graph_io(path, where)
    collector = _Check(where, kind, io)
    check(collector, contract)
    collector.done()
    return io
