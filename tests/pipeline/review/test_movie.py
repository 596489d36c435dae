"""The review movie's encoding, and the QC flags burnt into a merged review movie."""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from pipeline.qc.records import Flag
from pipeline.review.movie import burn_flags, flag_labels, flag_lines, review_encoding
from pipeline.review.text import label_box, text_size
from pipeline.video.decode import decode_range
from pipeline.video.probe import probe
from tests.clips import ClipSpec, info_from_timestamps, write_clip


def _flag(first: int, last: int, reason: str, track: int | None, severity: float) -> Flag:
    return Flag("sh010", first, last, track, reason, severity, 0.0, 0.0)


def test_flag_lines_per_frame_worst_first() -> None:
    flags = [
        _flag(2, 4, "jitter", 0, 0.2),
        _flag(3, 3, "low_identity", 1, 0.8),
        _flag(9, 12, "unreplaced", None, 1),
    ]
    lines = flag_lines(flags, list(range(10)))
    assert lines == {
        2: ["jitter track 0"],
        3: ["low_identity track 1", "jitter track 0"],
        4: ["jitter track 0"],
        9: ["unreplaced"],
    }


def test_review_encoding_is_h264_rec709_420() -> None:
    rinfo, choice = review_encoding(info_from_timestamps([0, 40, 80], [0], Fraction(1, 1000)), (320, 90))
    assert (rinfo.width, rinfo.height, rinfo.bit_depth) == (320, 90, 8)
    assert choice.name == "libx264" and choice.pix_fmt == "yuv420p" and not choice.hardware
    assert choice.colour is not None and choice.colour.as_dict()["matrix"] == "bt709"


def test_flags_are_burnt_into_their_frames_only(tmp_path) -> None:
    src = write_clip(tmp_path / "merged.mp4", ClipSpec(width=320, height=96, frames=12, rate=Fraction(12)))
    dst = str(tmp_path / "review.mp4")
    numbers = list(range(1001, 1013))
    assert burn_flags(src, dst, numbers, [_flag(1004, 1005, "low_identity", 0, 0.5)]) == 12
    before, after = probe(src), probe(dst)
    assert after.frame_count == 12 and after.codec == "h264" and after.pix_fmt == "yuv420p"
    assert after.pts == before.pts
    text = text_size(96)
    left, top, right, bottom = label_box(flag_labels(["low_identity track 0"], (320, 96), text)[0], text)
    old = [f.rgb.astype(int) for f in decode_range(src, before, 0, 12)]
    new = [f.rgb.astype(int) for f in decode_range(dst, after, 0, 12)]
    for i in range(12):
        change = np.abs(new[i][top:bottom, left:right] - old[i][top:bottom, left:right]).mean()
        assert (change > 20) == (i in (3, 4)), (i, change)
