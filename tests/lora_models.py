"""Tiny generated models for the LoRA tests (no download, no dependency on other stand-ins).

``make_swapper``: the inswapper contract (``target`` [1,3,128,128] in [0,1],
``source`` [1,512] latent -> [1,3,128,128] in [0,1], ``emap`` 512x512 as the
last initializer) with Conv, Gemm (transB) and MatMul weights so slots exist.
``make_recognizer``: the ArcFace contract ([1,3,112,112] -> [1,512]).
Shapes are declared with batch 1 (the contract) but the graphs are batch-agnostic
so the torch conversion trains on batches.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17


def _init(name: str, array: np.ndarray) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(array, dtype=np.float32), name)


def make_swapper(seed: int = 0, channels: int = 8) -> onnx.ModelProto:
    """A small swapper: features of the target modulated by a style from the source latent."""
    rng = np.random.default_rng(seed)
    c = channels
    inits = [
        _init("enc.conv.weight", rng.normal(0, 0.3, (c, 3, 3, 3))),
        _init("enc.conv.bias", rng.normal(0, 0.1, (c,))),
        _init("style.fc.weight", rng.normal(0, 0.05, (c, 512))),  # Gemm transB=1: [N, K]
        _init("style.fc.bias", np.zeros(c)),
        _init("axes23", np.zeros(0)),  # replaced below by an int64 tensor
        _init("mix.weight", rng.normal(0, 0.4, (c, c))),
        _init("dec.conv.weight", rng.normal(0, 0.3, (3, c, 1, 1))),
        _init("dec.conv.bias", np.zeros(3)),
        _init("one", np.ones(())),
    ]
    inits[4] = numpy_helper.from_array(np.array([2, 3], dtype=np.int64), "axes23")
    emap = rng.normal(0, 1, (512, 512)) / np.sqrt(512)
    inits.append(_init("emap", emap))  # last initializer, unused by the graph (insightface reads it)
    nodes = [
        helper.make_node("Conv", ["target", "enc.conv.weight", "enc.conv.bias"], ["h0"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["h0"], ["h"]),
        helper.make_node("Gemm", ["source", "style.fc.weight", "style.fc.bias"], ["s0"], transB=1),
        helper.make_node("Unsqueeze", ["s0", "axes23"], ["s"]),
        helper.make_node("Add", ["s", "one"], ["s1"]),
        helper.make_node("Mul", ["h", "s1"], ["hm"]),
        helper.make_node("Transpose", ["hm"], ["hm_nhwc"], perm=[0, 2, 3, 1]),
        helper.make_node("MatMul", ["hm_nhwc", "mix.weight"], ["mixed_nhwc"]),
        helper.make_node("Transpose", ["mixed_nhwc"], ["mixed"], perm=[0, 3, 1, 2]),
        helper.make_node("Conv", ["mixed", "dec.conv.weight", "dec.conv.bias"], ["d"]),
        helper.make_node("Add", ["d", "target_logit"], ["o"]),
        helper.make_node("Sigmoid", ["o"], ["output"]),
    ]
    # logit(target) so the untouched path roughly reproduces the target
    pre = [
        helper.make_node("Clip", ["target", "eps", "one_m_eps"], ["tc"]),
        helper.make_node("Sub", ["one", "tc"], ["omt"]),
        helper.make_node("Div", ["tc", "omt"], ["ratio"]),
        helper.make_node("Log", ["ratio"], ["target_logit"]),
    ]
    inits.insert(0, _init("eps", np.array(1e-3)))
    inits.insert(1, _init("one_m_eps", np.array(1 - 1e-3)))
    graph = helper.make_graph(
        pre + nodes,
        "standin_inswapper",
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


def _calibration_pictures() -> list[np.ndarray]:
    """(3, 112, 112) float32 pictures in [-1, 1] from skimage's bundled public-domain images."""
    import cv2
    from skimage import data

    pics = [data.astronaut(), data.coffee(), data.chelsea(), data.rocket(), np.stack([data.camera()] * 3, -1)]
    out = []
    for pic in pics:
        h, w = pic.shape[:2]
        side = min(h, w)
        square = pic[(h - side) // 2 : (h + side) // 2, (w - side) // 2 : (w + side) // 2]
        small = cv2.resize(square, (112, 112), interpolation=cv2.INTER_AREA)
        out.append(small.transpose(2, 0, 1).astype(np.float32) / 127.5 - 1.0)
    return out


def _zero_mean(kernels: np.ndarray) -> np.ndarray:
    """Kernels blind to flat colour, so embeddings follow structure (edges), not brightness."""
    return kernels - kernels.mean(axis=(1, 2, 3), keepdims=True)


def make_recognizer(seed: int = 1) -> onnx.ModelProto:
    """A small ArcFace-contract recognizer: input in [-1, 1] -> 512-d (not normalised)."""
    rng = np.random.default_rng(seed)
    inits = [
        _init("c1.weight", _zero_mean(rng.normal(0, 0.2, (16, 3, 4, 4)))),
        _init("c1.bias", np.zeros(16)),
        _init("c2.weight", rng.normal(0, 0.1, (32, 16, 3, 3))),
        _init("c2.bias", np.zeros(32)),
        _init("fc.weight", rng.normal(0, 0.2, (32, 512))),
        _init("fc.bias", np.zeros(512)),
    ]
    nodes = [
        helper.make_node("Conv", ["input.1", "c1.weight", "c1.bias"], ["a1"], strides=[4, 4]),
        helper.make_node("Relu", ["a1"], ["r1"]),
        helper.make_node("Conv", ["r1", "c2.weight", "c2.bias"], ["a2"], strides=[2, 2], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["a2"], ["r2"]),
        helper.make_node("GlobalAveragePool", ["r2"], ["p"]),
        helper.make_node("Flatten", ["p"], ["f"]),
    ]
    # Centre the pooled features on their mean over a few real pictures (what a
    # BatchNorm learns): otherwise every picture embeds within a few degrees of the others.
    probe = helper.make_model(
        helper.make_graph(
            nodes,
            "probe",
            [helper.make_tensor_value_info("input.1", TensorProto.FLOAT, [1, 3, 112, 112])],
            [helper.make_tensor_value_info("f", TensorProto.FLOAT, [1, 32])],
            inits,
        ),
        opset_imports=[helper.make_opsetid("", OPSET)],
    )
    probe.ir_version = 9
    import onnxruntime as ort

    sess = ort.InferenceSession(probe.SerializeToString(), providers=["CPUExecutionProvider"])
    feats = [sess.run(None, {"input.1": pic[None]})[0] for pic in _calibration_pictures()]
    inits.append(_init("centre", np.mean(feats, axis=0)))
    nodes += [
        helper.make_node("Sub", ["f", "centre"], ["fc0"]),
        helper.make_node("Gemm", ["fc0", "fc.weight", "fc.bias"], ["683"]),
    ]
    graph = helper.make_graph(
        nodes,
        "standin_arcface",
        [helper.make_tensor_value_info("input.1", TensorProto.FLOAT, [1, 3, 112, 112])],
        [helper.make_tensor_value_info("683", TensorProto.FLOAT, [1, 512])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 9
    onnx.checker.check_model(model)
    return model


def face_crops(count: int, size: int = 128, seed: int = 0) -> np.ndarray:
    """(count, size, size, 3) uint8 RGB crops of real faces (skimage astronaut), jittered."""
    import cv2
    from skimage import data

    img = data.astronaut()  # public domain; her face is around rows 20-220, cols 150-330
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        dy, dx = rng.integers(-12, 13, size=2)
        crop = img[30 + dy : 230 + dy, 140 + dx : 340 + dx]
        out.append(cv2.resize(crop, (size, size), interpolation=cv2.INTER_AREA))
    return np.stack(out)
