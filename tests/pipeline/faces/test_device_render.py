"""The device (torch) render path against the numpy/OpenCV FaceRenderer, on a real face.

The same pack of tiny stand-ins (inswapper- and GFPGAN-contract models that really
change the face) is loaded twice: on ONNX Runtime for the reference
:class:`FaceRenderer` and on the torch backend for :class:`DeviceFaceRenderer`.  The
face is skimage's astronaut; its box and five landmarks were measured once with the
default pack's YuNet detector and are fixed here (the detector is not under test).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch

from bench.models import onnxgraph, standins
from pipeline.errors import SpecError
from pipeline.faces.config import FaceConfig
from pipeline.faces.renderers import make_renderer
from pipeline.faces.renderers.cpu import FaceRenderer
from pipeline.faces.renderers.device import DeviceFaceRenderer
from pipeline.geometry.types import FaceTask, Identity
from pipeline.models.loader import FaceModels, load_face_models
from pipeline.models.pack import load_pack
from pipeline.models.runtime.settings import ExecutionConfig
from tests.faces_data import astronaut

# YuNet (default pack) on skimage.data.astronaut(), measured once.
ASTRO_BOX = np.array([178.6, 63.4, 269.1, 173.9], np.float32)
ASTRO_LANDMARKS = np.array(
    [[201.6, 105.5], [245.3, 104.9], [221.0, 127.2], [204.1, 145.4], [242.4, 145.4]], np.float32
)
MARGIN = 0.25  # the paste region is the face box grown by this much per side


@pytest.fixture(scope="module")
def pack_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Tiny stand-ins with production I/O; swapper and enhancer really change pixels."""
    folder: Path = tmp_path_factory.mktemp("device-render-pack")
    standins.scrfd(str(folder / "det_10g.onnx"), "tiny")
    standins.arcface(str(folder / "w600k_r50.onnx"), "tiny")
    standins.inswapper(str(folder / "inswapper_128.onnx"), "tiny", identity=False)
    standins.gfpgan(str(folder / "GFPGANv1.4.onnx"), "tiny", identity=False)
    entries = []
    for role in ("detector", "recognizer", "swapper", "enhancer"):
        kind, file = standins.PRODUCTION_FILES[role]
        entries.append({"role": role, "kind": kind, "file": file, "contract": standins.CONTRACTS[role]})
    standins.write_manifest(str(folder), entries, name="device-render-standins")
    return str(folder)


@pytest.fixture(scope="module")
def ort_models(pack_dir: str, tmp_path_factory: pytest.TempPathFactory) -> FaceModels:
    cache = str(tmp_path_factory.mktemp("pack-cache-ort"))
    return load_face_models(load_pack(pack_dir, cache_dir=cache), ExecutionConfig(backend="onnxruntime"))


@pytest.fixture(scope="module")
def torch_models(pack_dir: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[FaceModels]:
    """float32 torch models (on CUDA where there is one: TF32 off there, so float32 means float32)."""
    cache = str(tmp_path_factory.mktemp("pack-cache-torch"))
    tf32 = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    try:
        yield load_face_models(load_pack(pack_dir, cache_dir=cache), ExecutionConfig(backend="torch"))
    finally:
        torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = tf32


@pytest.fixture(scope="module")
def someone() -> dict[str, Identity]:
    vector = np.random.default_rng(1).standard_normal(512).astype(np.float32)
    return {
        "someone": Identity(
            name="someone",
            embedding=vector / np.linalg.norm(vector),
            source_rgb=astronaut(),
            source_landmarks=np.zeros((5, 2), np.float32),
            source_box=np.zeros(4, np.float32),
        )
    }


def _task(dx: float = 0.0, dy: float = 0.0) -> FaceTask:
    shift = np.array([dx, dy], np.float32)
    return FaceTask(0, "someone", ASTRO_BOX + np.tile(shift, 2), ASTRO_LANDMARKS + shift)


def _outside(shape: tuple[int, ...], tasks: list[FaceTask]) -> np.ndarray:
    """Pixels no paste may touch: outside every face box grown by MARGIN (plus 1 px rounding)."""
    inside = np.zeros(shape[:2], bool)
    for t in tasks:
        x1, y1, x2, y2 = (float(v) for v in t.box)
        mx, my = (x2 - x1) * MARGIN, (y2 - y1) * MARGIN
        inside[max(0, int(y1 - my) - 1) : int(y2 + my) + 2, max(0, int(x1 - mx) - 1) : int(x2 + mx) + 2] = (
            True
        )
    return ~inside


def _diff(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.abs(a.astype(np.float64) - b.astype(np.float64))


def _both(ort_models, torch_models, someone, config: FaceConfig, frames, tasks):
    reference = FaceRenderer(ort_models, someone, config).render(frames, tasks)
    device = DeviceFaceRenderer(torch_models, someone, config).render(frames, tasks)
    return reference, device


def test_swap_matches_the_cpu_path_and_touches_only_the_face(ort_models, torch_models, someone) -> None:
    frame = astronaut()
    tasks = [[_task()]]
    (ref,), (dev,) = _both(ort_models, torch_models, someone, FaceConfig(), [frame], tasks)
    assert dev.shape == frame.shape and dev.dtype == np.uint8

    outside = _outside(frame.shape, tasks[0])
    assert np.array_equal(dev[outside], frame[outside])  # (a) exactly unchanged
    inside = ~outside
    d = _diff(dev, ref)[inside]
    assert d.mean() <= 0.05 and np.percentile(d, 99) <= 1, (d.mean(), np.percentile(d, 99))  # (b)
    x1, y1, x2, y2 = ASTRO_BOX.astype(int)
    change = _diff(dev, frame)[y1:y2, x1:x2]
    assert change.mean() > 10.0, change.mean()  # (c) the face really changed


def test_uint16_frames_keep_their_depth(ort_models, torch_models, someone) -> None:
    frame8 = astronaut()
    frame16 = frame8.astype(np.uint16) * 257
    tasks = [[_task()]]
    (ref16,), (dev16,) = _both(ort_models, torch_models, someone, FaceConfig(), [frame16], tasks)
    assert dev16.dtype == np.uint16
    outside = _outside(frame16.shape, tasks[0])
    assert np.array_equal(dev16[outside], frame16[outside])  # (d) unchanged code values
    d16 = _diff(dev16, ref16)[~outside] / 257.0
    assert d16.mean() <= 0.05 and np.percentile(d16, 99) <= 1, (d16.mean(), np.percentile(d16, 99))

    (dev8,) = DeviceFaceRenderer(torch_models, someone, FaceConfig()).render([frame8], tasks)
    d = _diff(dev16 / 257.0, dev8)[~outside]
    assert d.mean() <= 0.35 and np.percentile(d, 99) <= 1, (d.mean(), np.percentile(d, 99))

    # torch.uint16 tensors in, torch.uint16 out
    renderer = DeviceFaceRenderer(torch_models, someone, FaceConfig())
    frames = torch.from_numpy(frame16[None].astype(np.int32)).to(torch.uint16).to(renderer.device)
    out = renderer.render_tensor(frames, tasks)
    assert out.dtype == torch.uint16 and out.device == renderer.device
    assert np.array_equal(out.to(torch.int32).cpu().numpy()[0], dev16.astype(np.int32))


def test_enhance_matches_the_cpu_path(ort_models, torch_models, someone) -> None:
    frame = astronaut()
    tasks = [[_task()]]
    config = FaceConfig(enhance=True)
    (ref,), (dev,) = _both(ort_models, torch_models, someone, config, [frame], tasks)
    (swap_only,) = DeviceFaceRenderer(torch_models, someone, FaceConfig()).render([frame], tasks)
    outside = _outside(frame.shape, tasks[0])
    assert np.array_equal(dev[outside], frame[outside])
    d = _diff(dev, ref)[~outside]
    assert d.mean() <= 0.05 and np.percentile(d, 99) <= 1, (d.mean(), np.percentile(d, 99))
    x1, y1, x2, y2 = ASTRO_BOX.astype(int)
    assert _diff(dev, swap_only)[y1:y2, x1:x2].mean() > 5.0  # the enhancer did something


def test_several_faces_across_a_batch(ort_models, torch_models, someone) -> None:
    astro = astronaut()
    wide = np.concatenate([astro, astro[:, ::-1]], axis=1).copy()  # two faces, the second mirrored
    mirrored = ASTRO_LANDMARKS.copy()
    mirrored[:, 0] = 1024 - 1 - mirrored[:, 0]
    mirrored = mirrored[[1, 0, 2, 4, 3]]  # left/right swap places in a mirror image
    mbox = np.array([1023 - ASTRO_BOX[2], ASTRO_BOX[1], 1023 - ASTRO_BOX[0], ASTRO_BOX[3]], np.float32)
    edge = np.zeros_like(wide)
    edge[:412, :392] = astro[100:, 120:]  # the face cut by the top edge: border replication matters
    frames = [wide, np.full_like(wide, 40), edge]
    tasks = [
        [_task(), FaceTask(1, "someone", mbox, mirrored)],
        [],
        [_task(-120.0, -100.0)],
    ]
    ref, dev = _both(ort_models, torch_models, someone, FaceConfig(batch_size=2), frames, tasks)
    assert dev[1] is frames[1]  # no task: the very same array
    for k in (0, 2):
        outside = _outside(frames[k].shape, tasks[k])
        assert np.array_equal(dev[k][outside], frames[k][outside])
        d = _diff(dev[k], ref[k])[~outside]
        assert d.mean() <= 0.05 and np.percentile(d, 99) <= 1, (k, d.mean(), np.percentile(d, 99))
        for t in tasks[k]:
            x1, y1, x2, y2 = np.clip(t.box, 0, None).astype(int)
            assert _diff(dev[k], frames[k])[y1:y2, x1:x2].mean() > 10.0


def test_other_backends_are_refused_by_field(ort_models, torch_models, someone) -> None:
    with pytest.raises(SpecError) as info:
        DeviceFaceRenderer(ort_models, someone, FaceConfig())
    assert info.value.field == "models.execution.backend" and "torch" in info.value.reason
    with pytest.raises(SpecError) as info:
        DeviceFaceRenderer(torch_models, someone, FaceConfig(occlusion=True))
    assert info.value.field == "faces.occlusion"


def test_actors_pick_the_device_path_only_for_torch_on_cuda(ort_models, torch_models, someone) -> None:
    config = FaceConfig(batch_size=4)
    assert type(make_renderer(ort_models, someone, config)) is FaceRenderer
    assert torch_models.swapper.device is not None
    on_cuda = torch_models.swapper.device.type == "cuda"
    expected = DeviceFaceRenderer if on_cuda else FaceRenderer
    assert type(make_renderer(torch_models, someone, config)) is expected


@pytest.mark.gpu
def test_cuda_fp16_matches_the_cpu_path(pack_dir, ort_models, someone, tmp_path_factory) -> None:
    cache = str(tmp_path_factory.mktemp("pack-cache-cuda"))
    cuda_models = load_face_models(
        load_pack(pack_dir, cache_dir=cache), ExecutionConfig(backend="torch", fp16=True)
    )
    frame = astronaut()
    tasks = [[_task()]]
    config = FaceConfig(enhance=True)
    (cpu,) = FaceRenderer(ort_models, someone, config).render([frame], tasks)
    renderer = DeviceFaceRenderer(cuda_models, someone, config)
    assert renderer.device.type == "cuda"
    out = renderer.render_tensor(torch.from_numpy(frame[None]).cuda(), tasks)
    assert out.device.type == "cuda" and out.dtype == torch.uint8
    gpu = out.cpu().numpy()[0]
    outside = _outside(frame.shape, tasks[0])
    assert np.array_equal(gpu[outside], frame[outside])
    d = _diff(gpu, cpu)[~outside]
    assert d.mean() <= 1.5 and np.percentile(d, 99) <= 10, (d.mean(), np.percentile(d, 99))
    assert renderer.model_seconds > 0 and renderer.stage_seconds["swap"] > 0


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_numpy_frames_go_through_pinned_buffers(pack_dir, someone, tmp_path_factory) -> None:
    """``render`` (numpy in and out, what the actor calls) equals ``render_tensor``, batch after batch."""
    cache = str(tmp_path_factory.mktemp("pack-cache-cuda-pinned"))
    cuda_models = load_face_models(load_pack(pack_dir, cache_dir=cache), ExecutionConfig(backend="torch"))
    renderer = DeviceFaceRenderer(cuda_models, someone, FaceConfig(batch_size=2))
    assert renderer._staging is not None
    frame8 = astronaut()
    for frames in ([frame8, frame8[:, ::-1].copy(), frame8], [frame8.astype(np.uint16) * 257] * 2):
        tasks = [[_task()]] + [[] for _ in frames[1:-1]] + [[_task(3.0, 2.0)]]
        out = renderer.render(frames, tasks)
        stack = np.stack([frames[0], frames[-1]]).astype(
            np.int32 if frames[0].dtype == np.uint16 else np.uint8
        )
        want = renderer.render_tensor(torch.from_numpy(stack).cuda(), [tasks[0], tasks[-1]]).cpu().numpy()
        assert out[0].dtype == frames[0].dtype and np.array_equal(out[0], want[0].astype(frames[0].dtype))
        assert np.array_equal(out[-1], want[1].astype(frames[0].dtype))
        assert all(out[k] is frames[k] for k in range(1, len(frames) - 1))


def _batch_one_swapper(path: str) -> None:
    """An inswapper-contract model that only runs batch 1 once converted (a fixed Reshape), as some exports do."""
    from onnx import helper, numpy_helper

    g = onnxgraph.GraphBuilder(seed=11)
    fixed = g.op("Reshape", ["target", g.const(np.array([1, 3, 128, 128], np.int64))])
    src = g.op("ReduceSum", ["source", g.const(np.array([1], np.int64))], keepdims=1)
    zero = g.op(
        "Unsqueeze", [g.op("Mul", [src, g.const(np.float32(0.0))]), g.const(np.array([2, 3], np.int64))]
    )
    out = g.op("Add", [g.op("Sub", [g.const(np.float32(1.0)), fixed]), zero])  # the negative image
    g.nodes.append(helper.make_node("Identity", [out], ["output"]))
    g.inits.append(numpy_helper.from_array(np.eye(512, dtype=np.float32), "emap"))
    model = g.model(
        [onnxgraph.value_info("target", [1, 3, 128, 128]), onnxgraph.value_info("source", [1, 512])],
        [onnxgraph.value_info("output", [1, 3, 128, 128])],
        "batch_one_swapper",
    )
    onnxgraph.save_model(model, path, {})


def test_a_swapper_that_refuses_batches_runs_one_face_per_call(tmp_path, ort_models, someone) -> None:
    from pipeline.models.inswapper import InSwapper
    from pipeline.models.pack import ModelEntry
    from pipeline.models.runtime import make_runner

    path = str(tmp_path / "batch_one.onnx")
    _batch_one_swapper(path)
    entry = ModelEntry(
        role="swapper", kind="inswapper", file="batch_one.onnx", contract=standins.CONTRACTS["swapper"]
    )
    swappers = {
        backend: InSwapper(make_runner(path, ExecutionConfig(backend=backend)), entry)
        for backend in ("onnxruntime", "torch")
    }
    frames = [astronaut(), astronaut()[:, ::-1].copy()]
    mirrored = ASTRO_LANDMARKS.copy()
    mirrored[:, 0] = 511 - mirrored[:, 0]
    mbox = np.array([511 - ASTRO_BOX[2], ASTRO_BOX[1], 511 - ASTRO_BOX[0], ASTRO_BOX[3]], np.float32)
    tasks = [[_task()], [FaceTask(1, "someone", mbox, mirrored[[1, 0, 2, 4, 3]])]]
    config = FaceConfig(color_match=False)
    ref_models = dataclasses.replace(ort_models, swapper=swappers["onnxruntime"])
    dev_models = dataclasses.replace(ort_models, swapper=swappers["torch"])
    ref = FaceRenderer(ref_models, someone, config).render(frames, tasks)
    renderer = DeviceFaceRenderer(dev_models, someone, config)
    dev = renderer.render(frames, tasks)
    assert swappers["torch"].runner.one_item_per_call  # the batch of two was refused, then face by face
    assert renderer.model_seconds > 0
    for k in range(2):
        d = _diff(dev[k], ref[k])
        assert d.mean() <= 0.05 and np.percentile(d, 99) <= 1, (k, d.mean())
        x1, y1, x2, y2 = tasks[k][0].box.astype(int)
        assert _diff(dev[k], frames[k])[y1:y2, x1:x2].mean() > 30.0  # the negative really went in
