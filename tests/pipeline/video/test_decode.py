"""decode_range(): exactly frames [a, b), in order, on closed- and open-GOP sources."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from pipeline.video.decode import decode_range
from pipeline.video.probe import probe
from tests.clips import frame_rgb, patch_means, read_index


@pytest.mark.parametrize("name", ["cfr_bframes", "open_gop", "vfr"])
def test_every_window_around_keyframes_is_exact(clips, name: str) -> None:
    info = probe(clips.path(name))
    starts = sorted({s for k in info.keyframes for s in (k - 1, k, k + 1) if 0 <= s < info.frame_count - 1})
    for start in starts:
        end = min(start + 4, info.frame_count)
        frames = list(decode_range(info.url, info, start, end))
        assert [f.index for f in frames] == list(range(start, end))
        assert [f.pts for f in frames] == list(info.pts[start:end])
        assert [read_index(f.rgb) for f in frames] == list(range(start, end))


def test_open_gop_seek_that_lands_late_reseeks_earlier(clips) -> None:
    info = probe(clips.path("open_gop"))
    # Claim the leading B-frame before each I-frame is a keyframe: the seek lands on the
    # I-frame (after the target) and decode_range must go back one keyframe.
    leading = {k - 1 for k in info.keyframes if k}
    fooled = dataclasses.replace(info, keyframes=tuple(sorted(set(info.keyframes) | leading)))
    for start in sorted(leading):
        frames = list(decode_range(info.url, fooled, start, start + 2))
        assert [read_index(f.rgb) for f in frames] == [start, start + 1]


def test_layout_and_colour_of_8_and_10_bit_frames(clips) -> None:
    cases = [
        ("cfr_bframes", np.uint8),
        ("ten_bit_hevc", np.uint16),
        ("odd_size", np.uint8),
        ("bt601_full_range", np.uint8),
        ("untagged", np.uint8),
    ]
    for name, dtype in cases:
        info = probe(clips.path(name))
        frame = next(decode_range(info.url, info, 3, 4))
        assert frame.rgb.shape == (info.height, info.width, 3) and frame.rgb.dtype == dtype
        # The colours drawn before encoding come back (source matrix and range honoured).
        drawn = frame_rgb(3, info.width, info.height, info.bit_depth)
        assert np.abs(patch_means(frame.rgb) - patch_means(drawn)).max() < 4.0


def test_range_must_be_inside_the_source(clips) -> None:
    from pipeline.errors import MediaError

    info = probe(clips.path("cfr_bframes"))
    with pytest.raises(MediaError):
        list(decode_range(info.url, info, 70, 76))
    with pytest.raises(MediaError):
        list(decode_range(info.url, info, 5, 5))
