"""Review frames: the layouts' sizes and halves, and burn-ins really drawn (compared with a reference
render of their text)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from pipeline.review.frames import FrameStamp, ReviewLook, review_frame, stamp_box, stamp_label, timecode_of
from pipeline.review.layout import compose, output_panel, review_size
from pipeline.review.text import Label, draw_labels, font, font_path, label_box


def _plate(value: int, width: int = 320, height: int = 180) -> np.ndarray:
    return np.full((height, width, 3), value, np.uint8)


def test_the_font_is_a_real_truetype_font() -> None:
    assert font_path() is not None and font_path().endswith("DroidSansMono.ttf")
    assert font(20).getlength("0000") == 2 * font(20).getlength("00")  # monospace: fixed-width stamps


@pytest.mark.parametrize(
    ("layout", "max_width", "size"),
    [
        ("side_by_side", 1920, (640, 180)),
        ("side_by_side", 320, (320, 90)),
        ("wipe", 1920, (320, 180)),
        ("after", 160, (160, 90)),
        ("after", 101, (100, 56)),  # even sizes for 4:2:0
    ],
)
def test_review_sizes_fit_and_are_even(layout, max_width, size) -> None:
    assert review_size(320, 180, layout, max_width) == size


def test_side_by_side_has_the_plate_left_and_the_output_right() -> None:
    frame = compose(_plate(40), _plate(200), "side_by_side", (640, 180))
    assert frame.shape == (180, 640, 3)
    assert (frame[:, :320] == 40).all() and (frame[:, 320:] == 200).all()
    assert output_panel(320, 180, "side_by_side", (640, 180)).x == 320


def test_wipe_has_half_of_each_and_a_line() -> None:
    frame = compose(_plate(40), _plate(200), "wipe", (320, 180))
    assert (frame[:, :150] == 40).all() and (frame[:, 170:] == 200).all()
    assert (frame[:, 159] == 255).all()  # the line between them
    assert output_panel(320, 180, "wipe", (320, 180)).scale == 1.0


def test_after_is_the_output_scaled() -> None:
    frame = compose(_plate(40), _plate(200), "after", (160, 90))
    assert frame.shape == (90, 160, 3) and (frame == 200).all()


def test_16_bit_frames_are_shown_in_8_bits() -> None:
    deep = np.full((180, 320, 3), 200 * 257, np.uint16)
    assert (compose(deep, deep, "after", (320, 180)) == 200).all()


def test_the_frame_number_is_drawn_and_equals_a_reference_render() -> None:
    look = ReviewLook.of("sh010", 320, 180, "side_by_side", 1920)
    rate = Fraction(24)
    stamps = [FrameStamp(n, timecode_of("01:00:00:00", n, rate)) for n in (7, 8)]
    frames = [review_frame(_plate(90), _plate(90), look, s) for s in stamps]
    left, top, right, bottom = stamp_box(look)
    for frame, stamp in zip(frames, stamps, strict=True):
        reference = draw_labels(np.zeros((180, 640, 3), np.uint8), [stamp_label(look, stamp)], look.text)
        region = frame[top:bottom, left:right]
        assert np.array_equal(region, reference[top:bottom, left:right])
        assert region.max() > 200 and (region == 0).any()  # white text on its black box
    assert not np.array_equal(frames[0][top:bottom, left:right], frames[1][top:bottom, left:right])
    assert np.array_equal(frames[0][:, 400:], frames[1][:, 400:])  # nothing else changed
    assert stamps[1].timecode == "01:00:00:08"


def test_identities_are_drawn_by_their_face_in_the_output_panel() -> None:
    look = ReviewLook.of("sh010", 320, 180, "side_by_side", 1920)
    box = np.array([100.0, 80.0, 160.0, 150.0], np.float32)
    plain = review_frame(_plate(90), _plate(90), look, FrameStamp(0, "00:00:00:00"))
    named = review_frame(_plate(90), _plate(90), look, FrameStamp(0, "00:00:00:00", [(box, "alice")]))
    changed = np.argwhere((plain != named).any(axis=-1))
    assert changed.size
    assert changed[:, 1].min() >= 320 + 100 - look.text  # right of the plate, at the box's left edge
    assert changed[:, 0].max() <= 80 + 2  # above the box


def test_labels_of_different_text_differ() -> None:
    blank = np.zeros((40, 200, 3), np.uint8)
    a = draw_labels(blank, [Label("0001", 4, 4)], 16)
    b = draw_labels(blank, [Label("0002", 4, 4)], 16)
    assert not np.array_equal(a, b)
    assert label_box(Label("0001", 4, 4), 16) == label_box(Label("0002", 4, 4), 16)
