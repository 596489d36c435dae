"""Alignment templates, paste-back and colour matching."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.geometry.align import (
    estimate_similarity,
    template_points,
    transform_points,
    warp_crops,
)
from pipeline.geometry.blend import match_color, paste_back
from tests.faces_data import astronaut

# the astronaut's landmarks (as YuNet finds them), a tilted synthetic set
ASTRO_LANDMARKS = np.array([[202, 106], [245, 105], [221, 127], [204, 145], [242, 145]], np.float32)
ASTRO_BOX = np.array([179, 63, 269, 174], np.float32)


@pytest.mark.filterwarnings("ignore::FutureWarning")
@pytest.mark.parametrize("size", [112, 128, 256])
def test_arcface_template_matches_insightface(size: int) -> None:
    from insightface.utils.face_align import estimate_norm

    tilted = ASTRO_LANDMARKS @ np.array([[0.96, -0.28], [0.28, 0.96]], np.float32) + 30
    for landmarks in (ASTRO_LANDMARKS, tilted):
        np.testing.assert_allclose(
            estimate_similarity(landmarks, size), estimate_norm(landmarks, size), atol=1e-3
        )


@pytest.mark.parametrize("template", ["arcface", "ffhq"])
def test_warp_puts_landmarks_on_the_template(template: str) -> None:
    rgb = astronaut()
    crops, affines = warp_crops(rgb, [ASTRO_LANDMARKS, ASTRO_LANDMARKS * 0.5], 256, template)
    assert crops.shape == (2, 256, 256, 3) and crops.dtype == np.uint8
    for affine, scale in zip(affines, (1.0, 0.5)):  # residual is in crop px: same for both
        mapped = transform_points(ASTRO_LANDMARKS * scale, affine)
        # five real landmarks cannot fit a similarity exactly: a few px of residual
        assert np.abs(mapped - template_points(256, template)).max() < 6.5
    # the same face in a frame shifted by (7, 5) px gives the same crop
    shifted = np.zeros((600, 600, 3), np.uint8)
    shifted[5:517, 7:519] = rgb
    again, _ = warp_crops(shifted, [ASTRO_LANDMARKS + (7, 5)], 256, template)
    assert np.abs(again[0].astype(int) - crops[0].astype(int))[32:-32, 32:-32].max() <= 1


def test_paste_back_of_the_unchanged_crop_keeps_the_frame() -> None:
    frame = astronaut()
    crops, affines = warp_crops(frame, [ASTRO_LANDMARKS], 128, "arcface")
    out = paste_back(frame.copy(), crops[0], affines[0], box=ASTRO_BOX)
    diff = np.abs(out.astype(int) - frame.astype(int))
    # two resamplings of a sharp picture: small error, only where the mask is
    assert diff.mean() < 0.2 and np.percentile(diff[diff > 0], 99) < 40


def test_paste_back_touches_only_the_face_box_and_keeps_uint16() -> None:
    frame8 = astronaut()
    frame16 = frame8.astype(np.uint16) * 257 + 3  # low bits set, as in a 10-bit source
    crops, affines = warp_crops(frame16, [ASTRO_LANDMARKS], 128, "arcface")
    assert crops.dtype == np.uint16
    white = np.full_like(crops[0], 65535)
    out = paste_back(frame16.copy(), white, affines[0], box=ASTRO_BOX, box_margin=0.25)
    assert out.dtype == np.uint16
    changed = np.any(out != frame16, axis=2)
    ys, xs = np.nonzero(changed)
    w, h = ASTRO_BOX[2] - ASTRO_BOX[0], ASTRO_BOX[3] - ASTRO_BOX[1]
    assert xs.min() >= ASTRO_BOX[0] - 0.25 * w - 1 and xs.max() <= ASTRO_BOX[2] + 0.25 * w + 1
    assert ys.min() >= ASTRO_BOX[1] - 0.25 * h - 1 and ys.max() <= ASTRO_BOX[3] + 0.25 * h + 1
    # the face centre is fully replaced, the feathered edge partly
    cx, cy = ASTRO_LANDMARKS[2].astype(int)
    assert np.all(out[cy, cx] == 65535)
    assert changed.sum() > 0.5 * w * h


def test_match_color_moves_statistics_inside_the_mask() -> None:
    rng = np.random.default_rng(0)
    ref = rng.normal((120, 90, 70), (20, 15, 10), size=(64, 64, 3)).astype(np.float32)
    src = rng.normal((60, 140, 200), (15, 25, 8), size=(64, 64, 3)).astype(np.float32)
    out = match_color(src, ref)
    np.testing.assert_allclose(out.reshape(-1, 3).mean(0), ref.reshape(-1, 3).mean(0), atol=0.5)
    np.testing.assert_allclose(out.reshape(-1, 3).std(0), ref.reshape(-1, 3).std(0), rtol=0.02)
    # a flat source is not blown up into noise: the gain is capped at 2
    flat = match_color(
        np.full((64, 64, 3), 50, np.float32) + rng.normal(0, 1, (64, 64, 3)).astype(np.float32), ref
    )
    assert flat.reshape(-1, 3).std(0).max() < 2.5
    same = match_color(ref, ref, np.ones((64, 64), np.float32))
    np.testing.assert_allclose(same, ref, atol=1e-3)


def test_a_paste_cut_by_the_box_margin_fades_out_with_no_hard_edge() -> None:
    """An enhancer's 512 px FFHQ crop reaches past the face box: where the box margin cuts
    the paste, and where the crop ends, it fades to nothing (no rectangle around the face)."""
    frame = np.full((300, 400, 3), 100, np.uint8)
    crops, affines = warp_crops(frame, [ASTRO_LANDMARKS], 512, "ffhq")
    white = np.full_like(crops[0], 255)
    out = paste_back(frame.copy(), white, affines[0], box=ASTRO_BOX, box_margin=0.25)
    level = out[..., 0].astype(float)
    # the largest step between neighbouring pixels: a hard edge would be a jump of ~155
    steps = max(np.abs(np.diff(level, axis=0)).max(), np.abs(np.diff(level, axis=1)).max())
    assert steps < 25, steps
    x1, y1, x2, y2 = ASTRO_BOX.astype(int)
    w, h = x2 - x1, y2 - y1
    # the face is fully pasted: the fades happen outside it
    assert np.all(out[y1 + h // 4 : y2 - h // 4, x1 + w // 4 : x2 - w // 4] == 255)
