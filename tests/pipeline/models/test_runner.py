"""Execution backends: ONNX Runtime sessions with checked providers, and the torch
backend (onnx2torch) agreeing with ONNX Runtime on every stand-in role model.

Stated tolerances, ORT vs torch, float32 on CPU: embeddings 1e-4 (absolute, on
L2-normalised vectors), uint8 images at most 1 level (rounding), masks 1e-5,
detections 1e-3 px.  Half precision on CUDA: embeddings 2e-2, images 3 levels.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from bench.models import standins
from pipeline.errors import ModelPackError
from pipeline.geometry.types import Face
from pipeline.models.arcface import ArcFaceRecognizer
from pipeline.models.detectors.scrfd import ScrfdDetector
from pipeline.models.gfpgan import GfpganEnhancer
from pipeline.models.inswapper import InSwapper
from pipeline.models.pack import ModelEntry
from pipeline.models.runtime import make_runner
from pipeline.models.runtime.batching import run_batched
from pipeline.models.runtime.ort_runner import OrtRunner
from pipeline.models.runtime.settings import (
    ExecutionConfig,
    installed_distribution_names,
    onnxruntime_conflict_warning,
)
from pipeline.models.runtime.torch_runner import TorchRunner
from pipeline.models.xseg import XsegOccluder

HAS_TORCH = (
    importlib.util.find_spec("torch") is not None and importlib.util.find_spec("onnx2torch") is not None
)
needs_torch = pytest.mark.skipif(
    not HAS_TORCH, reason="the torch backend needs the torch extra (torch, onnx2torch)"
)


ORT = ExecutionConfig()
TORCH = ExecutionConfig(backend="torch")


def entry(role: str) -> ModelEntry:
    kind, file = standins.PRODUCTION_FILES[role]
    return ModelEntry(role=role, kind=kind, file=file, sha256="0" * 64, contract=standins.CONTRACTS[role])


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Stand-ins with non-trivial weights where the tiny default is an identity."""
    folder = tmp_path_factory.mktemp("runner-standins")
    standins.write_pack(str(folder))
    standins.inswapper(str(folder / "inswapper_128.onnx"), identity=False)  # conv + source projection
    standins.gfpgan(str(folder / "GFPGANv1.4.onnx"), identity=False)  # tanh(conv)
    standins.xseg(str(folder / "xseg.onnx"), identity=False)  # sigmoid(conv)
    return folder


def test_ort_runner_reports_real_providers(models_dir: Path) -> None:
    runner = make_runner(str(models_dir / "inswapper_128.onnx"), ExecutionConfig(intra_op_threads=1))
    assert isinstance(runner, OrtRunner)
    assert runner.providers == ["CPUExecutionProvider"] and runner.warnings == []
    assert runner.input_names == ["target", "source"] and runner.output_names == ["output"]
    assert runner.input_shapes == [(1, 3, 128, 128), (1, 512)]


def test_unavailable_provider_falls_back_with_a_warning(
    models_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = ExecutionConfig(providers=("TensorrtExecutionProvider", "CUDAExecutionProvider"), fp16=True)
    runner = make_runner(str(models_dir / "xseg.onnx"), config)
    if "CUDAExecutionProvider" in runner.providers:
        pytest.skip("this onnxruntime has a working CUDA provider")
    assert runner.providers == ["CPUExecutionProvider"]
    assert any("CUDAExecutionProvider" in w and "not available" in w for w in runner.warnings)
    assert any("not available" in r.getMessage() for r in caplog.records)


def test_onnxruntime_conflict_warning() -> None:
    warning = onnxruntime_conflict_warning(["numpy", "onnxruntime", "onnxruntime_gpu"])
    assert warning is not None and "onnxruntime, onnxruntime-gpu" in warning
    assert onnxruntime_conflict_warning(["onnxruntime-gpu", "onnxruntime-extensions", "onnx"]) is None
    # This environment has exactly one build installed.
    assert onnxruntime_conflict_warning(installed_distribution_names()) is None


def test_unloadable_model_is_a_pack_error(tmp_path: Path) -> None:
    (tmp_path / "bad.onnx").write_bytes(b"garbage")
    with pytest.raises(ModelPackError, match=r"bad\.onnx: ONNX Runtime cannot load it"):
        make_runner(str(tmp_path / "bad.onnx"), ORT)


def test_run_batched_loops_over_fixed_batch_of_one(models_dir: Path) -> None:
    runner = make_runner(str(models_dir / "inswapper_128.onnx"), ORT)
    rng = np.random.default_rng(0)
    target = rng.random((3, 3, 128, 128), dtype=np.float32)
    source = rng.random((3, 512), dtype=np.float32)
    out = run_batched(runner, {"target": target, "source": source})[0]
    assert out.shape == (3, 3, 128, 128)
    one = runner.run({"target": target[1:2], "source": source[1:2]})[0]
    np.testing.assert_array_equal(out[1:2], one)


@needs_torch
def test_torch_runner_keeps_tensors_on_its_device(models_dir: Path) -> None:
    import torch

    runner = make_runner(str(models_dir / "xseg.onnx"), TORCH)
    assert isinstance(runner, TorchRunner)
    if runner.device.type == "cpu":
        half = make_runner(str(models_dir / "xseg.onnx"), ExecutionConfig(backend="torch", fp16=True))
        assert half.providers == ["torch:cpu:float32"]
        assert any("runs on CPU in float32" in w for w in half.warnings)
    x = torch.rand(2, 256, 256, 3)
    (out,) = runner.run_torch([x])
    assert (
        isinstance(out, torch.Tensor) and out.device == runner.device and tuple(out.shape) == (2, 256, 256, 1)
    )


def _role_outputs(folder: Path, config: ExecutionConfig) -> dict[str, object]:
    """Every role class on ``config``'s backend, on fixed inputs."""
    rng = np.random.default_rng(11)
    run = lambda role: make_runner(str(folder / standins.PRODUCTION_FILES[role][1]), config)
    frame = np.zeros((720, 1280, 3), np.uint8)
    frame[320:384, 640:704] = 255
    det = ScrfdDetector(run("detector"), entry("detector")).detect(frame)
    face_img = rng.integers(0, 256, (224, 224, 3), dtype=np.uint8)
    lms = np.array([[76, 103], [147, 103], [112, 143], [83, 185], [141, 184]], np.float32)
    faces = [Face(box=np.array([20, 20, 200, 200], np.float32), landmarks=lms + d, score=1.0) for d in (0, 3)]
    emb = ArcFaceRecognizer(run("recognizer"), entry("recognizer")).embed(face_img, faces)
    swapper = InSwapper(run("swapper"), entry("swapper"))
    swapped = swapper.swap(
        rng.integers(0, 256, (2, 128, 128, 3), dtype=np.uint8),
        [swapper.latent_from_embedding(e) for e in emb],
    )
    enhanced = GfpganEnhancer(run("enhancer"), entry("enhancer")).enhance(
        rng.integers(0, 256, (1, 512, 512, 3), dtype=np.uint8)
    )
    mask = XsegOccluder(run("occluder"), entry("occluder")).mask(
        rng.integers(0, 256, (2, 256, 256, 3), dtype=np.uint8)
    )
    return {"det": det, "emb": emb, "swapped": swapped, "enhanced": enhanced, "mask": mask}


def _assert_agree(a: dict, b: dict, emb_tol: float, image_tol: int) -> None:
    assert len(a["det"]) == len(b["det"]) == 1
    np.testing.assert_allclose(a["det"][0].box, b["det"][0].box, atol=1e-3)
    np.testing.assert_allclose(a["det"][0].landmarks, b["det"][0].landmarks, atol=1e-3)
    np.testing.assert_allclose(a["emb"], b["emb"], atol=emb_tol)
    for key in ("swapped", "enhanced"):
        assert np.abs(a[key].astype(int) - b[key].astype(int)).max() <= image_tol, key
    assert not np.array_equal(a["swapped"][0], a["swapped"][1])  # the swap depends on its inputs
    np.testing.assert_allclose(a["mask"], b["mask"], atol=1e-5 if image_tol <= 1 else 2e-3)


@needs_torch
def test_torch_backend_agrees_with_onnxruntime(models_dir: Path) -> None:
    _assert_agree(_role_outputs(models_dir, ORT), _role_outputs(models_dir, TORCH), emb_tol=1e-4, image_tol=1)


@pytest.mark.gpu
def test_torch_half_on_cuda_agrees_with_onnxruntime(models_dir: Path) -> None:
    half = ExecutionConfig(backend="torch", fp16=True)
    runner = make_runner(str(models_dir / "xseg.onnx"), half)
    assert runner.providers[0].startswith("torch:cuda") and runner.providers[0].endswith("float16")
    _assert_agree(_role_outputs(models_dir, ORT), _role_outputs(models_dir, half), emb_tol=2e-2, image_tol=3)
