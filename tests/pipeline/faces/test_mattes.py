"""Mattes: the exact blend mask of every paste, from ``paste_back`` and from both renderers.

``paste_back(matte=...)`` is checked against crops pasted by whole-pixel shifts (the
warped crop is then the crop itself, so the expected frame can be written down);
the renderers on real faces (skimage's astronaut, insightface's t1.jpg with six
people) with the default pack's detector and swapper.  The default pack has no
enhancer, so the enhance cases add a GFPGAN-contract stand-in that really changes
pixels.  The device renderer runs on the torch backend wherever torch puts it (the
CPU here, CUDA where there is one); one test marked ``gpu`` also covers the pinned
host buffers of CUDA.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING

import cv2
import numpy as np
import pytest

from bench.models import standins
from pipeline.faces.analyze import to_uint8
from pipeline.faces.config import FaceConfig
from pipeline.faces.renderers.cpu import FaceRenderer
from pipeline.geometry.align import invert_affine, warp_crops
from pipeline.geometry.blend import feather_mask, paste_back, paste_region
from pipeline.geometry.types import FaceTask, Identity
from pipeline.models.gfpgan import GfpganEnhancer
from pipeline.models.inswapper import InSwapper
from pipeline.models.loader import FaceModels
from pipeline.models.pack import ModelEntry
from pipeline.models.runtime import make_runner
from pipeline.models.runtime.settings import ExecutionConfig
from tests.faces_data import astronaut, t1

if TYPE_CHECKING:  # imports torch: only where the device tests run
    from pipeline.faces.renderers.device import DeviceFaceRenderer

S = 128  # crop size of the paste_back tests


def _shift(dx: int, dy: int) -> np.ndarray:
    """frame -> crop for a crop placed with its corner at frame pixel (dx, dy)."""
    return np.array([[1.0, 0.0, -dx], [0.0, 1.0, -dy]])


def _blend(plate: np.ndarray, layer: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    """paste_back's arithmetic on whole frames: float32, rounded, clipped to the dtype."""
    a = alpha[..., None]
    blended = plate.astype(np.float32) * (1.0 - a) + layer * a
    return np.clip(np.rint(blended), 0.0, float(np.iinfo(plate.dtype).max)).astype(plate.dtype)


def _placed(shape: tuple[int, ...], crop: np.ndarray, dx: int, dy: int) -> np.ndarray:
    """``crop`` (float32) at (dx, dy) in an otherwise zero frame."""
    layer = np.zeros(shape, np.float32)
    layer[dy : dy + S, dx : dx + S] = crop
    return layer


def _pictures(depth: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A real plate (the astronaut) and two real 128 px faces from t1.jpg, at ``depth`` bits."""
    group = t1()
    scale = 257 if depth == 16 else 1
    dtype = np.uint16 if depth == 16 else np.uint8

    def face(x: int, y: int) -> np.ndarray:
        return (group[y : y + S, x : x + S].astype(np.uint32) * scale).astype(dtype)

    return (astronaut().astype(np.uint32) * scale).astype(dtype), face(455, 275), face(260, 150)


@pytest.mark.parametrize("depth", [8, 16])
def test_one_paste_blends_with_exactly_its_matte(depth: int) -> None:
    plate, crop, _ = _pictures(depth)
    frame, matte = plate.copy(), np.zeros(plate.shape[:2], np.float32)
    paste_back(frame, crop, _shift(150, 60), matte=matte)

    alpha = feather_mask(S, erode=0.05, blur=0.08)
    want = np.zeros_like(matte)
    want[60 : 60 + S, 150 : 150 + S] = alpha
    assert np.array_equal(matte, want)  # the feather, where the crop went, and 0 elsewhere
    assert np.array_equal(frame, _blend(plate, _placed(plate.shape, crop, 150, 60), matte))

    bare = plate.copy()
    paste_back(bare, crop, _shift(150, 60))
    assert np.array_equal(bare, frame)  # keeping a matte changes nothing in the frame


def test_a_box_cut_paste_has_its_fade_in_the_matte() -> None:
    plate, crop, _ = _pictures(8)
    box = np.array([200.0, 100.0, 240.0, 150.0])  # smaller than the crop: the box margin cuts it
    frame, matte = plate.copy(), np.zeros(plate.shape[:2], np.float32)
    paste_back(frame, crop, _shift(150, 60), box=box, matte=matte)
    region = paste_region(_shift(150, 60), S, plate.shape[:2], box)
    assert region is not None
    x0, y0, x1, y1 = region
    inside = np.zeros(matte.shape, bool)
    inside[y0:y1, x0:x1] = True
    assert not matte[~inside].any() and matte[inside].max() > 0.99
    full = np.zeros_like(matte)
    full[60 : 60 + S, 150 : 150 + S] = feather_mask(S, erode=0.05, blur=0.08)
    assert np.all(matte <= full) and matte[y0, x0] < full[y0, x0]  # faded towards the cut
    assert np.array_equal(frame, _blend(plate, _placed(plate.shape, crop, 150, 60), matte))


@pytest.mark.parametrize("depth", [8, 16])
def test_overlapping_pastes_compose_their_mattes_like_their_blends(depth: int) -> None:
    plate, first, second = _pictures(depth)
    frame, matte = plate.copy(), np.zeros(plate.shape[:2], np.float32)
    paste_back(frame, first, _shift(150, 60), matte=matte)
    paste_back(frame, second, _shift(190, 90), matte=matte)

    layer1 = _placed(plate.shape, first, 150, 60)
    layer2 = _placed(plate.shape, second, 190, 90)
    a1, a2 = np.zeros_like(matte), np.zeros_like(matte)
    a1[60 : 60 + S, 150 : 150 + S] = feather_mask(S, erode=0.05, blur=0.08)
    a2[90 : 90 + S, 190 : 190 + S] = feather_mask(S, erode=0.05, blur=0.08)
    assert np.array_equal(frame, _blend(_blend(plate, layer1, a1), layer2, a2))
    assert np.allclose(matte, 1.0 - (1.0 - a1) * (1.0 - a2), rtol=0.0, atol=1e-6)
    assert not matte[(a1 == 0) & (a2 == 0)].any()
    assert 0.0 <= matte.min() and matte.max() <= 1.0

    # one layer in the end: the premultiplied faces over the plate, within the two roundings
    premultiplied = layer1 * (a1 * (1.0 - a2))[..., None] + layer2 * a2[..., None]
    top = float(np.iinfo(plate.dtype).max)
    composite = plate.astype(np.float64) * (1.0 - matte[..., None]) + premultiplied
    assert np.abs(composite - frame).max() <= 1.0 + 1e-3 * top / 255.0


def test_a_matte_of_the_wrong_size_or_type_is_refused() -> None:
    plate, crop, _ = _pictures(8)
    with pytest.raises(ValueError, match="matte must be float32"):
        paste_back(plate.copy(), crop, _shift(0, 0), matte=np.zeros((10, 10), np.float32))
    with pytest.raises(ValueError, match="matte must be float32"):
        paste_back(plate.copy(), crop, _shift(0, 0), matte=np.zeros(plate.shape[:2], np.float64))


# --------------------------------------------------------------------------- renderers


@pytest.fixture(scope="module")
def astro(default_models) -> dict[str, Identity]:
    from pipeline.faces.identity import identity_from_images

    return {"astro": identity_from_images("astro", [("astronaut", astronaut())], default_models)}


@pytest.fixture(scope="module")
def standin_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An inswapper-contract swapper and a GFPGAN-contract enhancer that both change pixels."""
    folder: Path = tmp_path_factory.mktemp("matte-standins")
    standins.inswapper(str(folder / "swap.onnx"), "tiny", identity=False)
    standins.gfpgan(str(folder / "gfpgan.onnx"), "tiny", identity=False)
    return folder


def _enhancer(folder: Path, execution: ExecutionConfig) -> GfpganEnhancer:
    entry = ModelEntry(
        role="enhancer", kind="gfpgan", file="gfpgan.onnx", contract=standins.CONTRACTS["enhancer"]
    )
    return GfpganEnhancer(make_runner(str(folder / "gfpgan.onnx"), execution), entry)


@pytest.fixture(scope="module")
def enhance_models(default_models, standin_dir: Path) -> FaceModels:
    """The default pack with the stand-in enhancer (the pack has none)."""
    return dataclasses.replace(
        default_models, enhancer=_enhancer(standin_dir, ExecutionConfig(providers=("CPUExecutionProvider",)))
    )


def _tasks(models: FaceModels, frame: np.ndarray, identity: str) -> list[FaceTask]:
    """One task per face the default detector finds in ``frame``."""
    return [FaceTask(-1, identity, f.box, f.landmarks) for f in models.detector.detect(frame)]


def _deep(frames: list[np.ndarray], depth: int) -> list[np.ndarray]:
    return [f.astype(np.uint16) * 257 for f in frames] if depth == 16 else frames


def check_mattes(
    frames: list[np.ndarray],
    tasks: list[list[FaceTask]],
    plain: list[np.ndarray],
    out: list[np.ndarray],
    mattes: list[np.ndarray | None],
) -> None:
    """The properties every renderer's mattes have (``plain``: what ``render`` returned)."""
    assert len(out) == len(mattes) == len(frames)
    for frame, per_frame, want, got, matte in zip(frames, tasks, plain, out, mattes):
        assert got.dtype == frame.dtype and np.array_equal(got, want)  # bit-identical to render
        if not per_frame:
            assert got is frame and matte is None
            continue
        assert matte is not None and matte.dtype == np.float32 and matte.shape == frame.shape[:2]
        assert 0.0 <= matte.min() and matte.max() <= 1.0
        untouched = matte == 0.0
        assert np.array_equal(got[untouched], frame[untouched])
        for task in per_frame:
            x1, y1, x2, y2 = np.clip(task.box, 0, None).astype(int)
            assert matte[y1:y2, x1:x2].max() > 0.99
        plate = frame.astype(np.float64) * (1.0 - matte[..., None].astype(np.float64))
        foreground = got - plate  # premultiplied: what a compositor puts over the plate
        assert np.array_equal(np.rint(plate + foreground), got)
        assert not foreground[untouched].any()


@pytest.fixture(scope="module")
def pictures(default_models) -> tuple[list[np.ndarray], list[list[FaceTask]]]:
    """t1 (six faces in one frame), a frame without tasks, the astronaut."""
    frames = [t1(), np.full((240, 320, 3), 77, np.uint8), astronaut()]
    tasks = [_tasks(default_models, frames[0], "astro"), [], _tasks(default_models, frames[2], "astro")]
    assert [len(t) for t in tasks] == [6, 0, 1]
    return frames, tasks


@pytest.mark.parametrize("depth", [8, 16])
@pytest.mark.parametrize("enhance", [False, True])
def test_cpu_renderer_mattes_on_real_faces(
    default_models,
    enhance_models,
    astro,
    pictures,
    depth,
    enhance,
) -> None:
    frames8, tasks = pictures
    frames = _deep(frames8, depth)
    models = enhance_models if enhance else default_models
    renderer = FaceRenderer(models, astro, FaceConfig(batch_size=4, enhance=enhance))
    plain = renderer.render(frames, tasks)
    out, mattes = renderer.render_with_mattes(frames, tasks)
    check_mattes(frames, tasks, plain, out, mattes)
    assert all(f is o for f, o in zip(frames, renderer.render_with_mattes(frames, [[]] * 3)[0]))


@pytest.mark.parametrize("depth", [8, 16])
def test_cpu_matte_re_blends_the_swapped_face(default_models, astro, depth: int) -> None:
    """A compositor holding the swapped face (warped to the frame) and the matte gets the render back."""
    plate = _deep([astronaut()], depth)[0]
    (task,) = _tasks(default_models, astronaut(), "astro")
    renderer = FaceRenderer(default_models, astro, FaceConfig(color_match=False))
    (out,), (matte,) = renderer.render_with_mattes([plate], [[task]])
    assert matte is not None

    swapper = default_models.swapper
    crops, affines = warp_crops(plate, [task.landmarks], renderer.crop_size, renderer.template)
    crop8 = to_uint8(crops[0])
    swapped = swapper.swap(crop8[None], [swapper.prepare(astro["astro"])])[0].astype(np.float32)
    if depth == 16:  # the change the model made, at full depth (as the renderer adds it)
        swapped = crops[0].astype(np.float32) + (swapped - crop8.astype(np.float32)) * 257.0
    height, width = plate.shape[:2]
    face = cv2.warpAffine(
        swapped,
        invert_affine(affines[0]),
        (width, height),
        flags=cv2.INTER_LINEAR,
        borderMode=cv2.BORDER_REPLICATE,
    )
    again = _blend(plate, face, matte)
    # the whole-frame warp samples a hair off the renderer's region warp: 1 code value, rarely
    assert np.abs(again.astype(np.float64) - out).max() <= 1.0
    assert (matte > 0.99).sum() > 2000  # a real face's worth of fully replaced pixels


# --------------------------------------------------------------------------- device renderer


@pytest.fixture(scope="module")
def someone() -> dict[str, Identity]:
    """A 512-d identity (the stand-in swapper's source size)."""
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


def _standin_models(base: FaceModels, folder: Path, execution: ExecutionConfig) -> FaceModels:
    entry = ModelEntry(
        role="swapper", kind="inswapper", file="swap.onnx", contract=standins.CONTRACTS["swapper"]
    )
    swapper = InSwapper(make_runner(str(folder / "swap.onnx"), execution), entry)
    return dataclasses.replace(base, swapper=swapper, enhancer=_enhancer(folder, execution))


def _device_frames(base: FaceModels) -> tuple[list[np.ndarray], list[list[FaceTask]]]:
    """One shape per batch: t1 (six faces), a frame without tasks, t1 mirrored."""
    group = t1()
    mirrored = group[:, ::-1].copy()
    frames = [group, np.full_like(group, 40), mirrored]
    tasks = [_tasks(base, group, "someone"), [], _tasks(base, mirrored, "someone")]
    assert len(tasks[0]) == 6 and len(tasks[2]) >= 5
    return frames, tasks


def _device_checks(
    base: FaceModels,
    folder: Path,
    someone: dict[str, Identity],
    execution: ExecutionConfig,
    depth: int,
    enhance: bool,
) -> DeviceFaceRenderer:
    """Device mattes have :func:`check_mattes`' properties and agree with the CPU path's."""
    from pipeline.faces.renderers.device import DeviceFaceRenderer

    frames8, tasks = _device_frames(base)
    frames = _deep(frames8, depth)
    config = FaceConfig(batch_size=4, enhance=enhance)
    renderer = DeviceFaceRenderer(_standin_models(base, folder, execution), someone, config)
    plain = renderer.render(frames, tasks)
    out, mattes = renderer.render_with_mattes(frames, tasks)
    check_mattes(frames, tasks, plain, out, mattes)

    # the CPU path's mattes of the same models agree (warps differ by a fraction of a pixel)
    onnx = ExecutionConfig(providers=("CPUExecutionProvider",))
    reference = FaceRenderer(_standin_models(base, folder, onnx), someone, config)
    _, want = reference.render_with_mattes(frames, tasks)
    for k in (0, 2):
        got, ref = mattes[k], want[k]
        assert got is not None and ref is not None
        d = np.abs(got - ref)
        assert d.mean() < 1e-3 and d.max() < 0.05, (k, d.mean(), d.max())
    return renderer


@pytest.mark.parametrize("depth", [8, 16])
@pytest.mark.parametrize("enhance", [False, True])
def test_device_renderer_mattes_on_real_faces(default_models, standin_dir, someone, depth, enhance) -> None:
    """On the torch backend's device: the CPU here, CUDA where there is one."""
    pytest.importorskip("torch")
    _device_checks(default_models, standin_dir, someone, ExecutionConfig(backend="torch"), depth, enhance)


@pytest.mark.gpu
@pytest.mark.parametrize("depth", [8, 16])
def test_cuda_renderer_mattes_through_pinned_buffers(default_models, standin_dir, someone, depth) -> None:
    renderer = _device_checks(
        default_models, standin_dir, someone, ExecutionConfig(backend="torch"), depth, enhance=True
    )
    assert renderer.device.type == "cuda" and renderer._staging is not None
