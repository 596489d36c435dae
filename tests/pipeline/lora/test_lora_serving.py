"""LoRA adapters served through the swapper path: pack -> loader -> identity -> FaceRenderer.

A pack whose swapper is the prepared stand-in inswapper (``tests/lora_models.py``)
with ``contract.lora``, two identities on a real frame (skimage's astronaut), one of
them with an adapter: the adapter changes that identity's face, the other identity
renders exactly as on the unprepared base model, and a batch mixing both gives the
pixels of rendering each on its own.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import pytest

from bench.models import standins
from pipeline.errors import ModelPackError, SpecError
from pipeline.faces.config import FaceConfig
from pipeline.faces.identity import with_adapter
from pipeline.faces.renderers.cpu import FaceRenderer
from pipeline.geometry.align import template_points
from pipeline.geometry.types import FaceTask, Identity
from pipeline.lora import AdapterCache, LoadedAdapter, LoraSlots, prepare_model, write_adapter
from pipeline.models.inswapper import InSwapper, PreparedSource
from pipeline.models.loader import FaceModels, load_face_models
from pipeline.models.pack import ModelEntry, load_pack
from pipeline.models.runtime import make_runner
from pipeline.models.runtime.batching import run_batched
from pipeline.models.runtime.settings import ExecutionConfig
from tests.faces_data import astronaut
from tests.lora_models import make_swapper

CPU = ExecutionConfig(providers=("CPUExecutionProvider",), intra_op_threads=1)
BOX = np.array([160, 60, 300, 220], np.float32)  # the astronaut's face, generously


def _landmarks() -> np.ndarray:
    """Five points on the astronaut's face: the 128 px ArcFace template, slightly rotated."""
    angle = np.deg2rad(8)
    rot = np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]])
    return ((template_points(128, "arcface") - 64) @ rot.T * 1.1 + [230, 130]).astype(np.float32)


def _identity(name: str, seed: int) -> Identity:
    vector = np.random.default_rng(seed).standard_normal(512).astype(np.float32)
    return Identity(
        name=name,
        embedding=vector / np.linalg.norm(vector),
        source_rgb=astronaut(),
        source_landmarks=_landmarks(),
        source_box=BOX,
    )


def _write_pack(folder: Path, swapper: onnx.ModelProto, lora: LoraSlots | None) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    standins.write_model("detector", str(folder / "det_10g.onnx"))
    standins.write_model("recognizer", str(folder / "w600k_r50.onnx"))
    onnx.save(swapper, str(folder / "inswapper_128.onnx"))
    contract = dict(standins.CONTRACTS["swapper"])
    if lora is not None:
        contract["lora"] = lora.to_contract()
    standins.write_manifest(
        str(folder),
        [
            {
                "role": "detector",
                "kind": "scrfd",
                "file": "det_10g.onnx",
                "contract": standins.CONTRACTS["detector"],
            },
            {"role": "recognizer", "kind": "arcface", "file": "w600k_r50.onnx", "contract": {}},
            {"role": "swapper", "kind": "inswapper", "file": "inswapper_128.onnx", "contract": contract},
        ],
    )
    return str(folder)


@dataclass
class Served:
    lora: FaceModels  # prepared swapper, lora_slots set
    base: FaceModels  # the same swapper unprepared
    adapter: LoadedAdapter
    cache: AdapterCache
    adapter_path: Path


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Served:
    tmp = tmp_path_factory.mktemp("lora_serving")
    original = make_swapper(seed=3)
    base_sha = hashlib.sha256(original.SerializeToString()).hexdigest()
    prepared, slots = prepare_model(original, rank=4, base_sha256=base_sha)
    cache_dir = str(tmp / "packs")
    lora = load_face_models(load_pack(_write_pack(tmp / "lora_pack", prepared, slots), cache_dir), CPU)
    base = load_face_models(load_pack(_write_pack(tmp / "base_pack", original, None), cache_dir), CPU)

    rng = np.random.default_rng(12)
    params = {n: rng.normal(0, 0.5, s).astype(np.float32) for n, s in slots.parameter_shapes().items()}
    adapter_path = tmp / "tuned.onnx_adapter"
    sha = write_adapter(str(adapter_path), slots, params)
    assert lora.lora_slots is not None
    cache = AdapterCache(lora.lora_slots, str(tmp / "adapters"), max_count=2)
    return Served(lora, base, cache.get(str(adapter_path), sha), cache, adapter_path)


def _render(models: FaceModels, identities: list[Identity], frames: list[np.ndarray], names: list[str]):
    tasks = [[FaceTask(track_id=0, identity=n, box=BOX, landmarks=_landmarks())] for n in names]
    renderer = FaceRenderer(models, {i.name: i for i in identities}, FaceConfig())
    return renderer.render(frames, tasks)


def test_loader_reads_slots_and_mutes_the_expected_ort_warnings(served: Served, capfd) -> None:
    assert served.base.lora_slots is None
    slots = served.lora.lora_slots
    assert slots is not None and slots.rank == 4 and len(slots.slots) == 4
    assert served.lora.swapper.lora_slots == slots
    capfd.readouterr()
    path = os.path.join(served.lora.pack.local_dir, "inswapper_128.onnx")
    make_runner(path, CPU, overridable_initializers=True)
    assert "appears in graph inputs" not in capfd.readouterr().err


def test_adapter_identity_changes_face_and_plain_identity_matches_base(served: Served) -> None:
    frame = astronaut()
    plain = _identity("plain", 1)
    tuned = with_adapter(_identity("tuned", 2), served.adapter)
    assert tuned.adapter is served.adapter and plain.adapter is None

    on_lora = _render(served.lora, [plain, tuned], [frame, frame], ["plain", "tuned"])
    on_base = _render(served.base, [plain], [frame], ["plain"])
    # No adapter: the prepared model on the warm session gives the base model's pixels exactly.
    assert np.array_equal(on_lora[0], on_base[0])
    assert not np.array_equal(on_base[0], frame)

    # Same embedding without the adapter, to isolate what the adapter does.
    untuned = _render(served.lora, [dataclasses.replace(tuned, adapter=None)], [frame], ["tuned"])[0]
    diff = np.abs(on_lora[1].astype(np.int16) - untuned.astype(np.int16)).max(axis=2)
    x1, y1, x2, y2 = BOX.astype(int)
    face = np.zeros(diff.shape, bool)
    face[y1:y2, x1:x2] = True
    assert diff[face].mean() > 2.0, diff[face].mean()
    mx, my = (x2 - x1) // 4 + 1, (y2 - y1) // 4 + 1  # paste_back's box margin (25 %)
    near = np.zeros(diff.shape, bool)
    near[y1 - my : y2 + my, x1 - mx : x2 + mx] = True
    assert not diff[~near].any()  # nothing outside the face's paste region moves


def test_mixed_batch_equals_rendering_each_identity_alone(served: Served) -> None:
    frame, flipped = astronaut(), np.ascontiguousarray(astronaut()[:, ::-1])
    plain, tuned = _identity("plain", 1), with_adapter(_identity("tuned", 2), served.adapter)
    frames = [frame, frame, flipped, frame]
    names = ["tuned", "plain", "tuned", "plain"]
    mixed = _render(served.lora, [plain, tuned], frames, names)
    for k, (f, n) in enumerate(zip(frames, names)):
        alone = _render(served.lora, [plain, tuned], [f], [n])[0]
        assert np.array_equal(mixed[k], alone), k

    # The swapper alone: grouped runs scattered back in order equal per-face runs.
    swapper: InSwapper = served.lora.swapper
    crops = np.stack([astronaut()[60:188, 170:298], flipped[60:188, 170:298]] * 2)
    prepared = [
        swapper.prepare(tuned),
        swapper.prepare(plain),
        swapper.prepare(plain),
        swapper.prepare(tuned),
    ]
    assert isinstance(prepared[0], PreparedSource) and prepared[0].adapter is served.adapter
    together = swapper.swap(crops, prepared)
    for k in range(4):
        assert np.array_equal(together[k], swapper.swap(crops[k : k + 1], prepared[k : k + 1])[0])
    assert not np.array_equal(together[0], swapper.swap(crops[:1], [prepared[1].latent])[0])


def test_manifest_slots_on_an_unprepared_file_are_refused(
    served: Served, tmp_path_factory: pytest.TempPathFactory
) -> None:
    tmp = tmp_path_factory.mktemp("lora_mislabelled")
    slots = served.lora.lora_slots
    pack = load_pack(_write_pack(tmp / "pack", make_swapper(seed=3), slots), str(tmp / "cache"))
    with pytest.raises(ModelPackError, match=r"inswapper_128\.onnx.*prepared swapper file"):
        load_face_models(pack, CPU)


def test_adapters_need_slots_and_the_onnxruntime_backend(served: Served) -> None:
    tuned = with_adapter(_identity("tuned", 2), served.adapter)
    with pytest.raises(SpecError, match=r"identities\.tuned\.adapter.*no contract\.lora"):
        FaceRenderer(served.base, {"tuned": tuned}, FaceConfig())

    path = os.path.join(served.lora.pack.local_dir, "inswapper_128.onnx")
    entry: ModelEntry = served.lora.pack.entry("swapper")  # type: ignore[assignment]
    on_torch = InSwapper(make_runner(path, ExecutionConfig(backend="torch")), entry)
    with pytest.raises(SpecError, match=r"identities\.tuned\.adapter.*onnxruntime backend"):
        on_torch.prepare(tuned)
    with pytest.raises(ValueError, match="takes no ONNX Runtime RunOptions"):
        import onnxruntime as ort

        run_batched(on_torch.runner, {"target": np.zeros((1, 3, 128, 128), np.float32)}, ort.RunOptions())
