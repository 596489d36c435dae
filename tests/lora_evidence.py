"""Models for the test that an adapter learns an identity, on real faces and a real recognizer.

``arcface_contract_sface``: the embedded default pack's SFace recognizer (128-d)
behind the ArcFace contract the trainer expects (input in [-1, 1], 512-d
output): the input is rescaled to SFace's 0..255 and its embedding mapped to
512-d by a matrix with orthonormal rows, so every cosine is SFace's own.

``make_identity_swapper``: an inswapper-contract stand-in whose output really
depends on the identity latent: a Gemm maps the latent to a 16x16 appearance
map, upsampled and added (in logit space) inside a face ellipse of the target;
a small conv path adds target-dependent detail.  Different latents give
different faces to the recognizer.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17


def _f32(name: str, array: np.ndarray) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(array, dtype=np.float32), name)


def orthonormal_rows(rows: int, cols: int, seed: int = 0) -> np.ndarray:
    """(rows, cols) with orthonormal rows: x @ it keeps every cosine between rows x."""
    q, _ = np.linalg.qr(np.random.default_rng(seed).normal(size=(cols, cols)))
    return q[:rows].astype(np.float32)


def arcface_contract_sface(sface: bytes) -> onnx.ModelProto:
    """The SFace model in ``sface`` as an ArcFace-contract 512-d recognizer (see the module doc)."""
    model = onnx.load_model_from_string(sface)
    graph = model.graph
    (data,) = [i.name for i in graph.input]
    (fc1,) = [o.name for o in graph.output]
    for opset in model.opset_import:  # the ops used are unchanged since 17; onnx2torch stops at 17
        if opset.domain == "":
            opset.version = OPSET
    graph.initializer.extend(
        [
            _f32("arc.scale", np.array(127.5)),
            _f32("arc.proj", orthonormal_rows(128, 512, seed=5)),
        ]
    )
    pre = [
        helper.make_node("Mul", ["input.1", "arc.scale"], ["arc.scaled"], name="arc.mul"),
        helper.make_node("Add", ["arc.scaled", "arc.scale"], [data], name="arc.add"),
    ]
    post = [helper.make_node("MatMul", [fc1, "arc.proj"], ["683"], name="arc.proj")]
    nodes = pre + list(graph.node) + post
    del graph.node[:]
    graph.node.extend(nodes)
    del graph.input[:]
    graph.input.append(helper.make_tensor_value_info("input.1", TensorProto.FLOAT, ["batch", 3, 112, 112]))
    del graph.output[:]
    graph.output.append(helper.make_tensor_value_info("683", TensorProto.FLOAT, ["batch", 512]))
    onnx.checker.check_model(model)
    return model


def face_ellipse(size: int = 128) -> np.ndarray:
    """(1, 1, S, S) soft mask of the face inside an inswapper-aligned crop."""
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float32) / (size - 1)
    r = ((xx - 0.5) / 0.32) ** 2 + ((yy - 0.55) / 0.40) ** 2
    return np.clip((1.2 - r) / 0.4, 0.0, 1.0)[None, None]


def make_identity_swapper(seed: int = 0, appearance_std: float = 1.0) -> onnx.ModelProto:
    """The latent-conditioned stand-in swapper (see the module doc); emap orthogonal and last."""
    rng = np.random.default_rng(seed)
    emap = np.linalg.qr(rng.normal(size=(512, 512)))[0]
    inits = [
        _f32("eps", np.array(1e-3)),
        _f32("one_m_eps", np.array(1 - 1e-3)),
        _f32("one", np.ones(())),
        _f32("app.weight", rng.normal(0, appearance_std, (3 * 16 * 16, 512))),  # Gemm transB: [N, K]
        _f32("app.bias", np.zeros(3 * 16 * 16)),
        numpy_helper.from_array(np.array([-1, 3, 16, 16], np.int64), "app.shape"),
        _f32("up.scales", np.array([1, 1, 8, 8])),
        _f32("enc.weight", rng.normal(0, 0.3, (16, 3, 3, 3))),
        _f32("enc.bias", np.zeros(16)),
        _f32("dec.weight", rng.normal(0, 0.1, (3, 16, 1, 1))),
        _f32("dec.bias", np.zeros(3)),
        _f32("mask", face_ellipse()),
        _f32("emap", emap),
    ]
    nodes = [
        helper.make_node("Clip", ["target", "eps", "one_m_eps"], ["tc"]),
        helper.make_node("Sub", ["one", "tc"], ["omt"]),
        helper.make_node("Div", ["tc", "omt"], ["ratio"]),
        helper.make_node("Log", ["ratio"], ["logit"]),
        helper.make_node("Gemm", ["source", "app.weight", "app.bias"], ["app"], transB=1),
        helper.make_node("Reshape", ["app", "app.shape"], ["app4"]),
        helper.make_node("Resize", ["app4", "", "up.scales"], ["appearance"], mode="linear"),
        helper.make_node("Conv", ["target", "enc.weight", "enc.bias"], ["h0"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["h0"], ["h"]),
        helper.make_node("Conv", ["h", "dec.weight", "dec.bias"], ["detail"]),
        helper.make_node("Add", ["appearance", "detail"], ["change"]),
        helper.make_node("Mul", ["change", "mask"], ["masked"]),
        helper.make_node("Add", ["logit", "masked"], ["o"]),
        helper.make_node("Sigmoid", ["o"], ["output"]),
    ]
    graph = helper.make_graph(
        nodes,
        "identity_standin",
        [
            helper.make_tensor_value_info("target", TensorProto.FLOAT, [1, 3, 128, 128]),
            helper.make_tensor_value_info("source", TensorProto.FLOAT, [1, 512]),
        ],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 3, 128, 128])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 9
    onnx.checker.check_model(model)
    return model
