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


def make_fixed_batch_swapper(
    seed: int = 0, channels: int = 128, *, shape_from_concat: bool = False, unconvertible: bool = False
) -> onnx.ModelProto:
    """An inswapper-contract swapper as another generator exports one.

    Fixed batch 1 on every input and output, shape constants that pin it (a
    ``Reshape`` of the style vector to ``[1, C, 1, 1]`` and of the output to
    ``[1, 3, 128, 128]``), initializers named ``w_1``, ``w_2`` ... with no
    ``style`` in any name, ``C``-channel 3x3 convolutions (at 32x32, so training
    stays cheap on a CPU), one depthwise (grouped) conv, and the emap last.

    ``shape_from_concat``: the style Reshape's shape is computed (``Concat`` of
    ``[1]`` and ``[C, 1, 1]``), so no shape constant can be rewritten: the same
    function, batch still pinned.  ``unconvertible``: adds an ``LpNormalization``
    node (``n_lp``), which ONNX Runtime runs and onnx2torch cannot convert.
    """
    rng = np.random.default_rng(seed)
    c = channels
    arrays: list[np.ndarray] = [
        rng.normal(0, 0.25, (c, 3, 3, 3)),  # w_1 encoder conv, stride 4 -> 32x32
        np.zeros(c),  # w_2
        rng.normal(0, 0.02, (c, 512)),  # w_3 style Gemm (transB)
        np.zeros(c),  # w_4
        np.array([1, c, 1, 1], np.int64),  # w_5 pinned reshape
        rng.normal(0, 0.5 / np.sqrt(9 * c), (c, c, 3, 3)),  # w_6 modulated conv
        np.zeros(c),  # w_7
        rng.normal(0, 0.2, (c, 1, 3, 3)),  # w_8 depthwise conv (group c): cannot take a slot
        rng.normal(0, 0.5 / np.sqrt(9 * c), (c, c, 3, 3)),  # w_9 second conv
        np.zeros(c),  # w_10
        rng.normal(0, 0.3 / np.sqrt(c), (3, c, 1, 1)),  # w_11 decoder 1x1
        np.zeros(3),  # w_12
        np.array([1, 1, 4, 4], np.float32),  # w_13 resize scales
        np.array(1e-3),  # w_14
        np.array(1 - 1e-3),  # w_15
        np.ones(()),  # w_16
        np.array([1, 3, 128, 128], np.int64),  # w_17 pinned output reshape
        rng.normal(0, 1, (512, 512)) / np.sqrt(512),  # w_18 emap, last
    ]
    inits = [
        numpy_helper.from_array(a if a.dtype == np.int64 else a.astype(np.float32), f"w_{i}")
        for i, a in enumerate(arrays, start=1)
    ]
    nodes = [
        helper.make_node("Clip", ["target", "w_14", "w_15"], ["t0"], name="n_0"),
        helper.make_node("Sub", ["w_16", "t0"], ["t1"], name="n_1"),
        helper.make_node("Div", ["t0", "t1"], ["t2"], name="n_2"),
        helper.make_node("Log", ["t2"], ["t3"], name="n_3"),  # logit(target)
        helper.make_node(
            "Conv", ["target", "w_1", "w_2"], ["t4"], name="n_4", strides=[4, 4], pads=[1, 1, 1, 1]
        ),
        helper.make_node("Relu", ["t4"], ["t5"], name="n_5"),
        helper.make_node("Gemm", ["source", "w_3", "w_4"], ["t6"], name="n_6", transB=1),
        helper.make_node("Reshape", ["t6", "w_5"], ["t7"], name="n_7"),  # may be replaced below
        helper.make_node("Add", ["t7", "w_16"], ["t8"], name="n_8"),
        helper.make_node("Conv", ["t5", "w_6", "w_7"], ["t9"], name="n_9", pads=[1, 1, 1, 1]),
        helper.make_node("Mul", ["t9", "t8"], ["t10"], name="n_10"),
        helper.make_node("Relu", ["t10"], ["t11"], name="n_11"),
        helper.make_node("Conv", ["t11", "w_8"], ["t12"], name="n_12", pads=[1, 1, 1, 1], group=c),
        helper.make_node("Conv", ["t12", "w_9", "w_10"], ["t13"], name="n_13", pads=[1, 1, 1, 1]),
        helper.make_node("Add", ["t13", "t5"], ["t14"], name="n_14"),
        helper.make_node("Conv", ["t14", "w_11", "w_12"], ["t15"], name="n_15"),
        helper.make_node("Resize", ["t15", "", "w_13"], ["t16"], name="n_16", mode="linear"),
        helper.make_node("Add", ["t16", "t3"], ["t17"], name="n_17"),
        helper.make_node("Sigmoid", ["t17"], ["t18"], name="n_18"),
        helper.make_node("Reshape", ["t18", "w_17"], ["output"], name="n_19"),
    ]
    if shape_from_concat:
        inits[4] = numpy_helper.from_array(np.array([c, 1, 1], np.int64), "w_5")
        inits.insert(0, numpy_helper.from_array(np.array([1], np.int64), "w_0"))
        nodes[7] = helper.make_node("Concat", ["w_0", "w_5"], ["t6s"], name="n_6s", axis=0)
        nodes.insert(8, helper.make_node("Reshape", ["t6", "t6s"], ["t7"], name="n_7"))
    if unconvertible:
        at = next(i for i, n in enumerate(nodes) if n.name == "n_5")
        nodes[at] = helper.make_node("Relu", ["t4"], ["t5r"], name="n_5")
        nodes.insert(at + 1, helper.make_node("LpNormalization", ["t5r"], ["t5"], name="n_lp", axis=1, p=2))
    graph = helper.make_graph(
        nodes,
        "main_graph",
        [
            helper.make_tensor_value_info("target", TensorProto.FLOAT, [1, 3, 128, 128]),
            helper.make_tensor_value_info("source", TensorProto.FLOAT, [1, 512]),
        ],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 3, 128, 128])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model
