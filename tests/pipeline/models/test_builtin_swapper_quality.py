"""The built-in swapper on real faces: the inner face only, colour matched, the same bytes every run.

The source is the face the demo picks from insightface's ``t1.jpg`` (the rule of
:mod:`pipeline.faces.portrait`), the target the astronaut, as in ``python -m jobs.demo``.
"""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from pipeline.faces.config import FaceConfig
from pipeline.faces.identity import identity_from_images
from pipeline.faces.portrait import MIN_OPEN, pick_portrait
from pipeline.faces.renderers.cpu import FaceRenderer
from pipeline.geometry.align import template_points, warp_crops
from pipeline.geometry.types import FaceTask, Identity
from pipeline.models.builtin_swapper import BuiltinSwapper
from pipeline.models.pack import ModelEntry
from tests.faces_data import astronaut, t1

T1_FRONTAL_OPEN_EYED = 2
"""The only face of t1.jpg (left to right) that looks at the camera with both eyes open."""


def _swapper(size: int = 256) -> BuiltinSwapper:
    entry = ModelEntry(role="swapper", kind="builtin", file=None, contract={"input_size": [size, size]})
    return BuiltinSwapper(None, entry)


@pytest.fixture(scope="module")
def hero(default_models) -> Identity:
    return identity_from_images("hero", [("t1", t1())], default_models, face_index=T1_FRONTAL_OPEN_EYED)


@pytest.fixture(scope="module")
def target(default_models) -> tuple[np.ndarray, np.ndarray]:
    """The astronaut's face, aligned at 256 px, and the picture's face landmarks."""
    (face,) = default_models.detector.detect(astronaut())
    crops, _ = warp_crops(astronaut(), [face.landmarks], 256)
    return crops[0], face.landmarks


def test_the_demo_rule_picks_the_frontal_open_eyed_face_of_t1(default_models) -> None:
    picture = t1()
    pick = pick_portrait(picture, default_models.detector.detect(picture))
    assert pick.index == T1_FRONTAL_OPEN_EYED, pick.reason()
    assert len(pick.faces) == 6
    chosen = pick.faces[pick.index]
    assert chosen.failures() == [] and chosen.eyes_open >= MIN_OPEN
    # everyone else fails a check: looking down (eyes closed by the measure) or turned away
    assert all(m.failures() for m in pick.faces if m.index != pick.index)
    assert {m.index for m in pick.faces if m.eyes_open < MIN_OPEN} == {0, 1, 3, 5}
    assert "face 2 of 6: frontal" in pick.reason()
    # the astronaut, eyes open and frontal, passes every check
    (alone,) = pick_portrait(astronaut(), default_models.detector.detect(astronaut())).faces
    assert alone.failures() == []


@pytest.mark.parametrize("size", [128, 256])
def test_the_region_holds_eyes_nose_and_mouth_and_leaves_hair_brow_ends_and_jaw(size: int) -> None:
    swapper = _swapper(size)
    region, mask = swapper.region, swapper.paste_mask
    assert region.shape == mask.shape == (size, size) and mask.dtype == np.float32
    assert np.all(mask[~region] == 0.0) and mask.max() == pytest.approx(1.0, abs=1e-4)
    points = template_points(size)
    eyes = float(np.linalg.norm(points[1] - points[0]))

    def at(point: np.ndarray, dx: float, dy: float) -> tuple[int, int]:
        x, y = point + (dx * eyes, dy * eyes)
        return int(y), int(x)

    # every landmark and what is around it is pasted (almost) in full: a fifth of an eye
    # distance around the eyes and the nose, a tenth around the mouth's corners
    for k, point in enumerate(points):
        reach = 0.2 if k < 3 else 0.1
        for dx, dy in ((0, 0), (-reach, 0), (reach, 0), (0, -reach), (0, reach)):
            assert mask[at(point, dx, dy)] > 0.99, (k, dx, dy)
    left, right, _, mouth_left, mouth_right = points
    outside = [
        at(left, -0.7, -0.35),  # the brows' outer ends
        at(right, 0.7, -0.35),
        at((left + right) / 2, 0, -0.9),  # the hairline
        at(mouth_left, -0.6, 0.45),  # the jaw line
        at(mouth_right, 0.6, 0.45),
        at((mouth_left + mouth_right) / 2, 0, 0.8),  # the chin's edge
    ]
    for row, col in outside:
        assert not region[row, col], (row, col)
    # nothing in the crop's outer band (a tenth of the crop on every side)
    band = max(2, size // 10)
    assert not region[:band].any() and not region[-band:].any()
    assert not region[:, :band].any() and not region[:, -band:].any()


def test_the_swapped_crop_is_the_target_outside_the_region(default_models, hero, target) -> None:
    swapper = default_models.swapper
    crop, _ = target
    frame = t1()
    faces = default_models.detector.detect(frame)
    others = sorted(faces, key=lambda f: float(f.box[0]))
    del others[T1_FRONTAL_OPEN_EYED]  # the hero's own face: swapped with itself, it hardly changes
    crops, _ = warp_crops(frame, [f.landmarks for f in others], swapper.crop_size)
    crops = np.concatenate([crop[None], crops])
    out = swapper.swap(crops, [swapper.prepare(hero)] * len(crops))
    assert out.dtype == np.uint8 and out.shape == crops.shape
    for before, after in zip(crops, out):
        assert np.array_equal(after[~swapper.region], before[~swapper.region])
        inner = swapper.paste_mask > 0.5
        assert np.abs(after[inner].astype(int) - before[inner]).mean() > 8  # the inner face did change


def test_swaps_are_the_same_bytes_every_run(default_models, hero, target) -> None:
    crop, _ = target
    first = default_models.swapper
    source = first.prepare(hero)
    once = first.swap(crop[None], [source])
    again = first.swap(crop[None].copy(), [source.copy()])
    fresh = _swapper()
    assert np.array_equal(once, again)
    assert np.array_equal(once, fresh.swap(crop[None], [fresh.prepare(hero)]))


def test_the_pasted_face_has_the_targets_colour(default_models, hero, target) -> None:
    crop, _ = target
    swapper = default_models.swapper
    source = swapper.prepare(hero)
    out = swapper.swap(crop[None], [source])[0]
    inner = (swapper.paste_mask > 0.5).astype(np.uint8)

    def lab_mean(rgb: np.ndarray) -> np.ndarray:
        return np.asarray(cv2.mean(cv2.cvtColor(rgb, cv2.COLOR_RGB2LAB), mask=inner)[:3])

    want, got, raw = lab_mean(crop), lab_mean(out), lab_mean(source)
    # measured: L 3 and a, b 0.5 from the target, while the source's own face is 10-15 away
    assert np.all(np.abs(got - want) < [5.0, 3.0, 3.0]), (got, want)
    assert np.abs(raw - want).max() > 10.0, (raw, want)


def test_dark_hair_at_the_sides_of_a_source_is_not_pasted(default_models, hero, target) -> None:
    crop, _ = target
    swapper = default_models.swapper
    source = swapper.prepare(hero)
    points = template_points(swapper.crop_size)
    eyes = float(np.linalg.norm(points[1] - points[0]))
    # a dark strand down the left cheek, inside the region, beside and below the eye
    x = int(points[0][0] - 0.38 * eyes)
    near = (slice(int(points[0][1] + 0.25 * eyes), int(points[0][1] + 0.6 * eyes)), slice(x - 2, x + 3))
    assert swapper.region[near].all()
    strand = source.copy()
    strand[near] = (25, 20, 18)
    combed = swapper.swap(crop[None], [strand])[0]

    def off(out: np.ndarray) -> float:
        return float(np.abs(out[near].astype(int) - crop[near]).mean())

    # where the strand is, the result is near the target's cheek (measured: 6 levels), not a dark line
    assert off(combed) < 10.0 and np.abs(combed[near].astype(int) - strand[near]).min() > 60


def test_the_renderer_keeps_the_plate_outside_the_inner_face(default_models, hero) -> None:
    frame = astronaut()
    (face,) = default_models.detector.detect(frame)
    renderer = FaceRenderer(default_models, {"hero": hero}, FaceConfig())
    out, mattes = renderer.render_with_mattes([frame], [[FaceTask(0, "hero", face.box, face.landmarks)]])
    changed = np.any(out[0] != frame, axis=2)
    matte = mattes[0]
    assert matte is not None
    # every changed pixel lies under the paste's matte, and the matte is the inner face only
    assert not np.any(changed & (matte == 0.0))
    x1, y1, x2, y2 = face.box
    rows, cols = np.nonzero(matte > 0)
    assert rows.min() > y1 and rows.max() < y2 and cols.min() > x1 and cols.max() < x2
    # no rim: along the matte's soft edge the output is within a few levels of the plate
    edge = (matte > 0) & (matte < 0.1)
    assert np.abs(out[0][edge].astype(int) - frame[edge]).mean() < 4.0
