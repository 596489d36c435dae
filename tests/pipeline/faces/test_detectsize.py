"""``faces.detect_size: auto``: small faces in a large frame are still found; big ones cost a probe only."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
from pydantic import ValidationError

from pipeline.faces.config import FaceConfig
from pipeline.faces.detectsize import DetectTiles, tiles
from tests.faces_data import _background, face_patches

SMALL_AT = (1500, 700)  # x, y of the small head crop in the 1080p frame


def frame_with(small: int | None) -> np.ndarray:
    """A 1080p frame: one large real face, and a ``small``-px-wide real head crop (None: none)."""
    patches = face_patches()
    frame = _background(1080, 1920).copy()
    big = cv2.resize(patches[1], (300, round(300 * patches[1].shape[0] / patches[1].shape[1])))
    frame[100 : 100 + big.shape[0], 200:500] = big
    if small is not None:
        p = patches[0]
        crop = cv2.resize(p, (small, round(small * p.shape[0] / p.shape[1])), interpolation=cv2.INTER_AREA)
        x, y = SMALL_AT
        frame[y : y + crop.shape[0], x : x + small] = crop
    return frame


@pytest.fixture(scope="module")
def analyzer():
    from pipeline.faces.analyze import FaceAnalyzer
    from pipeline.models.loader import load_face_models
    from pipeline.models.pack import load_pack
    from pipeline.models.runtime.settings import ExecutionConfig

    return FaceAnalyzer(load_face_models(load_pack("builtin:default"), ExecutionConfig()))


def test_small_faces_are_found_with_auto_and_missed_with_fixed(analyzer) -> None:
    frames = [frame_with(32), frame_with(40)]
    fixed = analyzer.analyze(frames, embed=False)
    plan = DetectTiles.of(FaceConfig(detect_size="auto"))
    assert plan is not None
    auto = analyzer.analyze(frames, embed=False, tiles=plan)
    assert plan.tiled is True and plan.tile_calls > 0
    for before, after in zip(fixed, auto):
        assert len(before) == 1  # the letterboxed 1080p frame misses the small face ...
        assert len(after) == 2  # ... the tiles find it, and the big face is not doubled
        small = min(after, key=lambda f: float(f.box[2] - f.box[0]))
        x1, y1, x2, y2 = small.box.tolist()
        assert SMALL_AT[0] <= x1 < x2 <= SMALL_AT[0] + 40 and SMALL_AT[1] <= y1 < y2 <= SMALL_AT[1] + 60
        big = max(after, key=lambda f: float(f.box[2] - f.box[0]))
        assert np.array_equal(big.box, before[0].box)  # the letterboxed pass's face, as it was


def test_large_faces_only_cost_one_probe_and_a_smaller_input(analyzer) -> None:
    frames = [frame_with(None)] * 3
    fixed = analyzer.analyze(frames, embed=False)
    plan = DetectTiles()
    auto = analyzer.analyze(frames, embed=False, tiles=plan)
    assert plan.tiled is False
    assert plan.tile_calls == len(tiles(1080, 1920, 640, 640))  # the first frame's probe only
    # the 300 px wide face needs no 640 x 640 input (tests/pipeline/faces/test_detect_reduced.py)
    assert plan.size is not None and plan.size < (640, 640)
    assert [len(f) for f in auto] == [len(f) for f in fixed] == [1, 1, 1]
    assert DetectTiles.of(FaceConfig()) is None  # fixed, the default: no tiles ever


def test_tiles_cover_the_frame_with_overlap() -> None:
    for h, w in ((1080, 1920), (2160, 3840), (720, 1280), (500, 600)):
        grid = tiles(h, w, 640, 640)
        covered = np.zeros((h, w), bool)
        for x, y, tw, th in grid:
            assert 0 <= x and x + tw <= w and 0 <= y and y + th <= h
            covered[y : y + th, x : x + tw] = True
        assert covered.all()
    assert tiles(500, 600, 640, 640) == [(0, 0, 600, 500)]
    with pytest.raises(ValidationError, match="detect_size"):
        FaceConfig(detect_size="tiny")  # type: ignore[arg-type]
