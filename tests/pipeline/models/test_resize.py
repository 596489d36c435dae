"""A detector's fixed ONNX input made free in height and width, checked by running it (real ONNX Runtime)."""

from __future__ import annotations

import cv2
import numpy as np
import onnx
from onnx import numpy_helper

from bench.models.onnxgraph import GraphBuilder, save_model, value_info
from bench.models.standins import scrfd
from pipeline.models.detectors.detector_sizes import DetectorSizes
from pipeline.models.detectors.scrfd import ScrfdDetector
from pipeline.models.detectors.yunet import YunetDetector
from pipeline.models.pack import ModelEntry, load_pack
from pipeline.models.runtime import make_runner
from pipeline.models.runtime.ort_runner import OrtRunner
from pipeline.models.runtime.resize import free_input_size, outputs_follow_size, same_outputs
from pipeline.models.runtime.settings import ExecutionConfig
from tests.faces_data import astronaut

CPU = ExecutionConfig(providers=("CPUExecutionProvider",), intra_op_threads=1)


def picture_feed(width: int, height: int) -> np.ndarray:
    """The astronaut (a real picture) as a float NCHW tensor of 0..255 values."""
    rgb = cv2.resize(astronaut(), (width, height), interpolation=cv2.INTER_AREA)
    return np.ascontiguousarray(rgb.transpose(2, 0, 1)[None], dtype=np.float32)


def test_the_default_packs_yunet_runs_at_320_once_freed_with_the_same_outputs_at_640() -> None:
    path = load_pack("builtin:default").path("detector")
    original = make_runner(path, CPU)
    assert original.input_shapes[0] == (None, 3, 640, 640)  # exported fixed at 640 x 640
    assert "does not run at 320x320" in (outputs_follow_size(original, (640, 640), (320, 320)) or "")
    graph, why = free_input_size(path)
    assert graph is not None and why == ""
    freed = OrtRunner(path, CPU, graph=graph)
    assert freed.input_shapes[0] == (None, 3, None, None)
    assert same_outputs(original, freed, picture_feed(640, 640)) is None
    feed = {original.input_names[0]: picture_feed(640, 640)}
    for a, b in zip(original.run(feed), freed.run(feed), strict=True):
        assert np.array_equal(a, b)  # measured: bit for bit, not only within the tolerance
    assert outputs_follow_size(freed, (640, 640), (320, 320)) is None
    small = freed.run({freed.input_names[0]: picture_feed(320, 320)})
    assert [o.shape[1] for o in small[:3]] == [1600, 400, 100]  # cells at strides 8, 16, 32


def test_a_graph_with_constant_reshapes_is_freed_but_runs_only_at_its_size(tmp_path) -> None:
    path = str(tmp_path / "det.onnx")
    scrfd(path, fixed_size=640)
    graph, _ = free_input_size(path)
    assert graph is not None
    freed = OrtRunner(path, CPU, graph=graph)
    assert same_outputs(make_runner(path, CPU), freed, picture_feed(640, 640)) is None
    problem = outputs_follow_size(freed, (640, 640), (320, 320))
    assert problem is not None and problem.startswith("it does not run at 320x320 (") and "Reshape" in problem


def test_graphs_that_are_not_one_image_input_are_not_rewritten(tmp_path) -> None:
    g = GraphBuilder()
    vector = save_model(
        g.model([value_info("x", [1, 10])], [value_info(g.op("Relu", ["x"]), [1, 10])], "vector"),
        str(tmp_path / "vector.onnx"),
        {},
    )
    g = GraphBuilder()
    two = save_model(
        g.model(
            [value_info("a", [1, 3, 8, 8]), value_info("b", [1, 3, 8, 8])],
            [value_info(g.op("Add", ["a", "b"]), [1, 3, 8, 8])],
            "two",
        ),
        str(tmp_path / "two.onnx"),
        {},
    )
    assert free_input_size(vector["path"]) == (None, "its input x has 2 dimensions, not N, C, H, W")
    assert free_input_size(two["path"]) == (None, "it has 2 inputs, not one image")
    (tmp_path / "junk.onnx").write_bytes(b"not a model")
    graph, why = free_input_size(str(tmp_path / "junk.onnx"))
    assert graph is None and why.startswith("cannot read it")


def _yunet(path: str) -> tuple[YunetDetector, ModelEntry]:
    entry = ModelEntry(role="detector", kind="yunet", file="yunet.onnx", contract={"input_size": [640, 640]})
    return YunetDetector(make_runner(path, CPU), entry), entry


def test_a_rewrite_that_changes_the_outputs_is_not_used(tmp_path) -> None:
    original = load_pack("builtin:default").path("detector")
    detector, entry = _yunet(original)
    changed = onnx.load(original)
    weight = changed.graph.initializer[0]
    weight.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(weight) * np.float32(1.5), weight.name))
    path = str(tmp_path / "changed.onnx")
    onnx.save(changed, path)
    sizes = DetectorSizes(detector, YunetDetector, entry, path, CPU)  # its graph is not the session's
    assert sizes.at((320, 320), astronaut()) is None
    assert sizes.refused is not None and "the rewritten graph's output" in sizes.refused
    assert "differs from the original's" in sizes.refused and not sizes.rewritten
    assert sizes.at((640, 640), astronaut()) is detector  # the exported size is always there


def test_the_torch_backend_keeps_a_fixed_input() -> None:
    path = load_pack("builtin:default").path("detector")
    detector, entry = _yunet(path)
    sizes = DetectorSizes(detector, YunetDetector, entry, path, ExecutionConfig(backend="torch"))
    assert sizes.at((320, 320), astronaut()) is None
    assert sizes.refused is not None and "the torch backend runs it as exported" in sizes.refused


def test_a_graph_with_a_free_input_runs_every_size_on_its_own_session(tmp_path) -> None:
    path = str(tmp_path / "det.onnx")
    scrfd(path)  # input [1, 3, ?, ?], like insightface's SCRFD exports
    entry = ModelEntry(role="detector", kind="scrfd", file="det.onnx", contract={"input_size": [640, 640]})
    detector = ScrfdDetector(make_runner(path, CPU), entry)
    sizes = DetectorSizes(detector, ScrfdDetector, entry, path, CPU)
    smaller = sizes.at((320, 320), astronaut())
    assert smaller is not None and smaller.runner is detector.runner and smaller.input_size == (320, 320)
    assert not sizes.rewritten and sizes.refused is None and sizes.made() == [smaller]
    assert sizes.at((320, 320), astronaut()) is smaller
