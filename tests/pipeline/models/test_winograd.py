"""Winograd F(4x4, 3x3) rewrite of large 3x3 convolutions (CPU sessions).

Every rewritten graph is run by ONNX Runtime beside the original and must agree
to float32 rounding: max |difference| <= 1e-4 of the output's largest value.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from pipeline.models.runtime.ort_runner import OrtRunner
from pipeline.models.runtime.settings import CPU, ExecutionConfig
from pipeline.models.runtime.winograd import find_sites, rewrite_winograd

RTOL = 1e-4


def _conv_model(
    c: int,
    k: int,
    h: int | None,
    w: int | None,
    *,
    pads: tuple[int, int, int, int] = (1, 1, 1, 1),
    bias: bool = True,
    seed: int = 0,
    reflect: bool = False,
) -> onnx.ModelProto:
    """x [N, c, h, w] -> (reflect Pad ->) 3x3 Conv (k channels) -> Relu -> y."""
    rng = np.random.default_rng(seed)
    inits = [
        numpy_helper.from_array((rng.standard_normal((k, c, 3, 3)) / np.sqrt(9 * c)).astype(np.float32), "w")
    ]
    inputs = ["x", "w"]
    if bias:
        inits.append(numpy_helper.from_array(rng.standard_normal(k).astype(np.float32), "b"))
        inputs.append("b")
    nodes = []
    if reflect:
        inits.append(numpy_helper.from_array(np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64), "rp"))
        nodes.append(helper.make_node("Pad", ["x", "rp"], ["xr"], mode="reflect"))
        inputs[0] = "xr"
    nodes += [
        helper.make_node("Conv", inputs, ["c"], kernel_shape=[3, 3], pads=list(pads)),
        helper.make_node("Relu", ["c"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "conv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", c, h or "H", w or "W"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", k, "Ho", "Wo"])],
        initializer=inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _run(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(model.SerializeToString(), options, providers=[CPU])
    return session.run(None, {"x": x})[0]


def _assert_close(got: np.ndarray, want: np.ndarray) -> None:
    assert got.shape == want.shape
    err = float(np.abs(got - want).max())
    assert err <= RTOL * float(np.abs(want).max()), (
        f"max difference {err:g} for outputs up to {np.abs(want).max():g}"
    )


@pytest.mark.parametrize(
    ("c", "k", "h", "w", "pads", "bias", "batch"),
    [
        (16, 24, 32, 32, (1, 1, 1, 1), True, 1),  # "same" conv, whole tiles
        (24, 16, 29, 29, (0, 0, 0, 0), True, 2),  # "valid" conv, 27x27 out: the last tiles are cropped
        (16, 16, 17, 21, (1, 0, 2, 1), False, 3),  # asymmetric pads, no bias, batch of 3
    ],
)
def test_rewrite_matches_the_direct_convolution(c, k, h, w, pads, bias, batch):
    original = _conv_model(c, k, h, w, pads=pads, bias=bias)
    rewritten = onnx.ModelProto()
    rewritten.CopyFrom(original)
    sites = rewrite_winograd(rewritten, min_channels=8)
    assert [s.weight for s in sites] == ["w"]
    onnx.checker.check_model(rewritten)
    assert not [n for n in rewritten.graph.node if n.op_type == "Conv" and n.input[1] == "w"]
    assert "w" not in {i.name for i in rewritten.graph.initializer}  # its values live in the new w9
    x = np.random.default_rng(1).standard_normal((batch, c, h, w)).astype(np.float32)
    _assert_close(_run(rewritten, x), _run(original, x))


def test_reflect_pad_then_valid_conv_the_inswapper_pattern():
    original = _conv_model(32, 32, 32, 32, pads=(0, 0, 0, 0), reflect=True)
    rewritten = onnx.ModelProto()
    rewritten.CopyFrom(original)
    assert len(rewrite_winograd(rewritten, min_channels=32)) == 1
    x = np.random.default_rng(2).random((1, 32, 32, 32), dtype=np.float32)
    _assert_close(_run(rewritten, x), _run(original, x))


def test_only_convolutions_where_it_pays_are_rewritten():
    rng = np.random.default_rng(3)

    def weight(name: str, k: int, c: int, size: int = 3) -> onnx.TensorProto:
        return numpy_helper.from_array(rng.standard_normal((k, c, size, size)).astype(np.float32), name)

    inits = [
        weight("w_ok", 32, 32),
        weight("w_stride", 32, 32),
        weight("w_group", 32, 16),
        weight("w_dil", 32, 32),
        weight("w_1x1", 32, 32, 1),
        weight("w_thin", 8, 32),
        weight("w_small", 32, 32),
    ]
    conv = helper.make_node
    nodes = [
        conv("Conv", ["x", "w_ok"], ["a"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        conv("Conv", ["a", "w_stride"], ["b"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2]),
        conv("Conv", ["a", "w_group"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], group=2),
        conv("Conv", ["a", "w_dil"], ["d"], kernel_shape=[3, 3], pads=[2, 2, 2, 2], dilations=[2, 2]),
        conv("Conv", ["a", "w_1x1"], ["e"], kernel_shape=[1, 1]),
        conv("Conv", ["a", "w_thin"], ["f"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),  # 8 output channels
        conv("Conv", ["b", "w_small"], ["g"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),  # 8x8 output
        conv("Conv", ["a", "w_lora"], ["h"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),  # overridable weight
        conv("Conv", ["z", "w_ok"], ["i"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),  # spatial size unknown
    ]
    w_lora = weight("w_lora", 32, 32)
    graph = helper.make_graph(
        nodes,
        "mixed",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 32, 16, 16]),
            helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, 32, "H", "W"]),
            helper.make_tensor_value_info("w_lora", TensorProto.FLOAT, [32, 32, 3, 3]),
        ],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 32, "H", "W"]) for n in "bcdefghi"],
        initializer=[*inits, w_lora],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    assert [s.name for s in find_sites(model, min_channels=16)] == ["conv0"]
    assert find_sites(model, min_channels=64) == []
    # w_ok also feeds the unknown-size conv, so the rewrite keeps it for that node.
    assert len(rewrite_winograd(model, min_channels=16)) == 1
    assert "w_ok" in {i.name for i in model.graph.initializer}
    onnx.checker.check_model(model)


def test_cpu_runner_rewrites_large_convolutions_and_agrees(tmp_path: Path):
    path = tmp_path / "wide.onnx"
    onnx.save(_conv_model(256, 256, 16, 16, seed=4), path)
    cpu = ExecutionConfig(providers=(CPU,), intra_op_threads=1)
    fast = OrtRunner(str(path), cpu)
    plain = OrtRunner(str(path), cpu.model_copy(update={"cpu_winograd": False}))
    assert fast.rewrites == ["winograd F(4x4,3x3) on 1 conv(s)"]
    assert plain.rewrites == []
    x = np.random.default_rng(5).random((2, 256, 16, 16), dtype=np.float32)
    _assert_close(fast.run({"x": x})[0], plain.run({"x": x})[0])
    # The file on disk is never changed.
    assert [n.op_type for n in onnx.load(str(path)).graph.node] == ["Conv", "Relu"]


def test_cpu_runner_leaves_models_without_large_convolutions_as_they_are(tmp_path: Path):
    path = tmp_path / "narrow.onnx"
    onnx.save(_conv_model(16, 16, 32, 32), path)
    runner = OrtRunner(str(path), ExecutionConfig(providers=(CPU,)))
    assert runner.rewrites == []


def test_graphs_below_opset_11_are_left_alone(tmp_path: Path):
    model = _conv_model(256, 256, 16, 16)
    model.opset_import[0].version = 10  # Pad/Slice took attributes then: the rewrite's nodes would not load
    assert find_sites(model) == []
    path = tmp_path / "old.onnx"
    onnx.save(model, path)
    assert OrtRunner(str(path), ExecutionConfig(providers=(CPU,))).rewrites == []


def test_a_rewritten_graph_that_does_not_load_falls_back_to_the_file(tmp_path: Path, monkeypatch, caplog):
    import pipeline.models.runtime.ort_runner as ort_runner_module

    path = tmp_path / "wide.onnx"
    onnx.save(_conv_model(256, 256, 16, 16, seed=6), path)
    monkeypatch.setattr(
        ort_runner_module, "winograd_model", lambda p: (b"not an onnx graph", ["winograd (broken)"])
    )
    with caplog.at_level("WARNING"):
        runner = OrtRunner(str(path), ExecutionConfig(providers=(CPU,)))
    assert runner.rewrites == []
    assert "running the original" in caplog.text
    x = np.random.default_rng(7).random((1, 256, 16, 16), dtype=np.float32)
    want = _run(onnx.load(str(path)), x)
    _assert_close(runner.run({"x": x})[0], want)
