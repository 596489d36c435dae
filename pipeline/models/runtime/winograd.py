"""Winograd F(4x4, 3x3) for the large 3x3 convolutions of a model, for CPU sessions.

ONNX Runtime's CPU convolution computes a 3x3 convolution as im2col + SGEMM:
9 multiply-adds per input channel, output channel and output pixel, already
close to a core's float32 peak.  Winograd's minimal filtering (Lavin & Gray,
"Fast Algorithms for Convolutional Neural Networks", 2016) computes each 4x4
output tile from a 6x6 input tile with 36 products per channel pair instead of
144, so the dominant GEMM does a quarter of the work; the input and output
transforms are linear maps that cost little once channels are many.

The rewrite is exact algebra; in float32 the results differ from the direct
convolution by rounding only (about 1e-5 of the output's range, below one
level of a 16-bit frame).  It replaces a ``Conv`` node with standard ONNX ops:

    Pad -> Reshape [N*C, 1, Hp, Wp] -> Conv with the 36 input-transform kernels (6x6, stride 4)
    -> [36, C, N*T] -> MatMul with the transformed weights U [36, K, C] (36 batched GEMMs)
    -> output transform (MatMul [16, 36]) -> [N, K, H, W] (+ bias)

The transformed weights U = G w G^T are a [36, 9] x [9, K*C] product inside
the graph on the original weights, so the graph stays the size it was (and
under protobuf's 2 GB limit); ONNX Runtime folds the product into a constant
when the session starts.  U holds 36 instead of 9 values per kernel: the
session holds 4x the memory of the weights it replaces (about +1.3 GB for an
inswapper_128-sized swapper).  Handing U to the session from numpy instead
(``add_external_initializers``) was measured to cost more: ONNX Runtime
copies such buffers, and the originals must stay alive.

Only nodes where it pays are rewritten: stride 1, dilation 1, one group, a
constant 3x3 weight (an initializer that is not a graph input, so LoRA slots
and other overridable weights are left alone), static channel and spatial
sizes, at least ``min_channels`` input and output channels and an output at
least ``MIN_SIDE`` pixels on each side.  Measured on a 2-core AMD EPYC (one
thread): 256 x 256 channels at 32x32 gain 1.5x, 1024 x 1024 at 32x32 2.5x;
at 12x12-14x14 only 1.2x, not worth 4x the weights' memory; 128 x 128
channels, or 512 x 512 at 8x8, lose to the transforms.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

TILE = 4
"""Output tile side (F(4x4, 3x3)): 6x6 input tiles."""
MIN_CHANNELS = 256
"""Default: rewrite a 3x3 convolution only with at least this many input and output channels."""
MIN_OPSET = 11
"""The rewritten graph's Pad and Slice take their pads and starts as inputs (opset 11 on)."""
MIN_SIDE = 16
"""Rewrite only outputs at least this many pixels high and wide (4 tiles a side)."""


def _f43_matrices() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """B^T (6x6), G (6x3), A^T (4x6) of F(4, 3) with points 0, +-1, +-2, infinity."""
    bt = np.array(
        [
            [4, 0, -5, 0, 1, 0],
            [0, -4, -4, 1, 1, 0],
            [0, 4, -4, -1, 1, 0],
            [0, -2, -1, 2, 1, 0],
            [0, 2, -1, -2, 1, 0],
            [0, 4, 0, -5, 0, 1],
        ],
        dtype=np.float64,
    )
    g = np.array(
        [
            [1 / 4, 0, 0],
            [-1 / 6, -1 / 6, -1 / 6],
            [-1 / 6, 1 / 6, -1 / 6],
            [1 / 24, 1 / 12, 1 / 6],
            [1 / 24, -1 / 12, 1 / 6],
            [0, 0, 1],
        ],
        dtype=np.float64,
    )
    at = np.array(
        [[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0], [0, 1, -1, 8, -8, 1]],
        dtype=np.float64,
    )
    return bt, g, at


@dataclass(frozen=True)
class ConvSite:
    """One ``Conv`` node that the rewrite applies to."""

    index: int
    """Position in ``graph.node``."""
    name: str
    x: str
    y: str
    weight: str
    bias: str | None
    channels_in: int
    channels_out: int
    height: int
    width: int
    pads: tuple[int, int, int, int]
    """top, left, bottom, right."""

    @property
    def out_hw(self) -> tuple[int, int]:
        top, left, bottom, right = self.pads
        return self.height + top + bottom - 2, self.width + left + right - 2


def _attrs(node: onnx.NodeProto) -> dict[str, Any]:
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _static_shapes(model: onnx.ModelProto) -> dict[str, tuple[int | None, ...]]:
    """Tensor name -> shape (None for unknown dims), by shape inference on a weightless copy.

    Large initializers become typed graph inputs, so inference neither copies
    nor serialises the weights (the real files run to hundreds of MB); small ones
    (shape constants) keep their values for Reshape and friends.
    """
    graph = model.graph
    light = onnx.GraphProto()
    light.node.extend(graph.node)
    light.input.extend(graph.input)
    light.output.extend(graph.output)
    listed = {i.name for i in graph.input}
    for init in graph.initializer:
        if init.name in listed:
            continue
        if int(np.prod(init.dims, dtype=np.int64)) <= 64:
            light.initializer.append(init)
        else:
            light.input.append(helper.make_tensor_value_info(init.name, init.data_type, list(init.dims)))
    probe = helper.make_model(light, opset_imports=model.opset_import)
    probe.ir_version = model.ir_version
    inferred = onnx.shape_inference.infer_shapes(probe, data_prop=True)
    shapes: dict[str, tuple[int | None, ...]] = {}
    for vi in (*inferred.graph.value_info, *inferred.graph.input, *inferred.graph.output):
        t = vi.type.tensor_type
        if t.HasField("shape"):
            shapes[vi.name] = tuple(d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim)
    return shapes


def find_sites(model: onnx.ModelProto, *, min_channels: int = MIN_CHANNELS) -> list[ConvSite]:
    """The top-level ``Conv`` nodes of ``model`` that the rewrite applies to (see the module doc).

    None in graphs of the default domain's opset below ``MIN_OPSET``: the new
    nodes use ``Pad`` and ``Slice`` with their pads and starts as inputs.
    """
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    if opset < MIN_OPSET:
        return []
    graph = model.graph
    inits = {i.name: i for i in graph.initializer}
    graph_inputs = {i.name for i in graph.input}
    candidates = []
    for index, node in enumerate(graph.node):
        if node.op_type != "Conv" or node.domain not in ("", "ai.onnx") or len(node.input) < 2:
            continue
        weight = inits.get(node.input[1])
        if weight is None or weight.name in graph_inputs or list(weight.dims[2:]) != [3, 3]:
            continue
        bias = node.input[2] if len(node.input) > 2 and node.input[2] else None
        if bias is not None and (bias not in inits or bias in graph_inputs):
            continue
        a = _attrs(node)
        if a.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET") or int(a.get("group", 1)) != 1:
            continue
        if any(int(s) != 1 for s in a.get("strides", [1, 1])) or any(
            int(d) != 1 for d in a.get("dilations", [1, 1])
        ):
            continue
        if len(weight.dims) != 4 or min(weight.dims[0], weight.dims[1]) < min_channels:
            continue
        candidates.append((index, node, weight, bias, a))
    if not candidates:
        return []
    shapes = _static_shapes(model)
    sites = []
    for index, node, weight, bias, a in candidates:
        shape = shapes.get(node.input[0])
        if shape is None or len(shape) != 4 or any(d is None or d <= 0 for d in shape[1:]):
            continue
        _, c, h, w = (int(d or 0) for d in shape)  # all static and positive: checked just above
        pads = tuple(int(p) for p in a.get("pads", [0, 0, 0, 0]))
        if c != weight.dims[1] or len(pads) != 4:
            continue
        site = ConvSite(
            index=index,
            name=node.name or f"conv{index}",
            x=node.input[0],
            y=node.output[0],
            weight=weight.name,
            bias=bias,
            channels_in=int(c),
            channels_out=int(weight.dims[0]),
            height=int(h),
            width=int(w),
            pads=(pads[0], pads[1], pads[2], pads[3]),
        )
        if min(site.out_hw) >= MIN_SIDE:
            sites.append(site)
    return sites


def _site_nodes(
    site: ConvSite, prefix: str, weight: np.ndarray
) -> tuple[list[onnx.NodeProto], list[TensorProto]]:
    """The nodes and initializers that compute ``site.y`` from ``site.x`` by F(4x4, 3x3)."""
    bt, g, at = _f43_matrices()
    c, k = site.channels_in, site.channels_out
    out_h, out_w = site.out_hw
    th, tw = -(-out_h // TILE), -(-out_w // TILE)
    top, left, _, _ = site.pads
    bottom = TILE * th + 2 - site.height - top
    right = TILE * tw + 2 - site.width - left
    inits: list[TensorProto] = []
    nodes: list[onnx.NodeProto] = []

    def const(value: np.ndarray, name: str) -> str:
        full = f"{prefix}{name}"
        inits.append(numpy_helper.from_array(np.ascontiguousarray(value), full))
        return full

    def node(op: str, inputs: list[str], name: str, **attrs: Any) -> str:
        out = f"{prefix}{name}"
        nodes.append(helper.make_node(op, inputs, [out], name=out, **attrs))
        return out

    def shape(*dims: int) -> str:
        return const(np.array(dims, np.int64), f"shape{len(inits)}")

    # Weights: U = G w G^T per (k, c), a [36, 9] x [9, K*C] product that ONNX Runtime folds at load.
    w9 = weight.astype(np.float32).transpose(2, 3, 0, 1).reshape(9, k * c)
    u = node("MatMul", [const(np.kron(g, g).astype(np.float32), "G"), const(w9, "w9")], "U36")
    u = node("Reshape", [u, shape(36, k, c)], "U")
    # Input transform: every 6x6 tile (stride 4) of every channel through the 36 kernels of B^T d B.
    x = site.x
    if any((top, left, bottom, right)):
        x = node("Pad", [x, const(np.array([0, 0, top, left, 0, 0, bottom, right], np.int64), "pads")], "pad")
    x = node("Reshape", [x, shape(-1, 1, TILE * th + 2, TILE * tw + 2)], "planes")
    kernels = np.kron(bt, bt).astype(np.float32).reshape(36, 1, 6, 6)
    v = node("Conv", [x, const(kernels, "B")], "tiles", kernel_shape=[6, 6], strides=[TILE, TILE])
    v = node("Reshape", [v, shape(-1, c, 36, th * tw)], "v4")  # [N, C, 36, T]
    v = node("Transpose", [v], "vt", perm=[2, 1, 0, 3])  # [36, C, N, T]
    v = node("Reshape", [v, shape(36, c, -1)], "V")
    m = node("MatMul", [u, v], "M")  # [36, K, N*T]
    m = node("Reshape", [m, shape(36, -1)], "m2")
    y = node("MatMul", [const(np.kron(at, at).astype(np.float32), "A"), m], "y16")  # [16, K*N*T]
    y = node("Reshape", [y, shape(TILE, TILE, k, -1, th, tw)], "y6")
    y = node("Transpose", [y], "yt", perm=[3, 2, 4, 0, 5, 1])  # [N, K, th, 4, tw, 4]
    y = node("Reshape", [y, shape(-1, k, TILE * th, TILE * tw)], "yfull")
    if (TILE * th, TILE * tw) != (out_h, out_w):
        y = node(
            "Slice",
            [
                y,
                const(np.array([0, 0], np.int64), "crop0"),
                const(np.array([out_h, out_w], np.int64), "crop1"),
                const(np.array([2, 3], np.int64), "cropaxes"),
            ],
            "crop",
        )
    if site.bias is not None:
        y = node("Add", [y, node("Reshape", [site.bias, shape(1, k, 1, 1)], "bias")], "biased")
    nodes[-1].output[0] = site.y
    return nodes, inits


def rewrite_winograd(model: onnx.ModelProto, *, min_channels: int = MIN_CHANNELS) -> list[ConvSite]:
    """Rewrite the eligible 3x3 convolutions of ``model`` in place; returns the sites rewritten.

    Weights that no other node uses are dropped (their values now live in the
    new ``w9`` initializers).  The graph's inputs, outputs and every other node
    are unchanged, and the initializers keep their order, new ones first.
    """
    sites = find_sites(model, min_channels=min_channels)
    if not sites:
        return []
    graph = model.graph
    inits = {i.name: i for i in graph.initializer}
    replaced: dict[int, list[onnx.NodeProto]] = {}
    added: list[TensorProto] = []
    for n, site in enumerate(sites):
        nodes, new = _site_nodes(site, f"winograd{n}/", numpy_helper.to_array(inits[site.weight]))
        replaced[site.index] = nodes
        added.extend(new)
    kept_nodes: list[onnx.NodeProto] = []
    for index, node in enumerate(graph.node):
        kept_nodes.extend(replaced.get(index, [node]))
    used = {name for node in kept_nodes for name in node.input} | {o.name for o in graph.output}
    rewritten = {site.weight for site in sites}
    kept_inits = [i for i in graph.initializer if i.name in used or i.name not in rewritten]
    del graph.node[:]
    graph.node.extend(kept_nodes)
    del graph.initializer[:]
    graph.initializer.extend([*added, *kept_inits])
    return sites
