"""Sources with every colour description the colour tests need, and how outputs are read back.

Five tiny sources (256x120, the smallest frame DNxHR takes; 8 frames at 4 fps,
so 1 s chunks make two): BT.709 limited, BT.601 full range, untagged 8-bit,
BT.709 10-bit and BT.2020 PQ 10-bit.  :func:`read_back` reads an output's tags
the way a conform tool does: a MOV's own ``colr`` box for primaries, transfer
and matrix (FFmpeg's DNxHR decoder would otherwise report BT.709 for a file
that says nothing) and the stream's range; an MP4's stream (its VUI).
"""

from __future__ import annotations

import dataclasses
import os
from fractions import Fraction

import av
import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from pipeline.colour import UNSPECIFIED, ColourTags
from pipeline.video.colr import read_colr
from pipeline.video.decode import decode_range
from pipeline.video.probe import VideoInfo, probe
from tests.clips import ClipSpec, patch_means, write_clip

W, H = 256, 120
_BASE = ClipSpec(width=W, height=H, frames=8, rate=Fraction(4), gop=4, bframes=0, audio=False, timecode=None)
SOURCES: dict[str, ClipSpec] = {
    "bt709": _BASE,
    "bt601full": dataclasses.replace(_BASE, color_primaries=6, color_trc=6, colorspace=6, color_range=2),
    "untagged": dataclasses.replace(_BASE, tag_colour=False),
    "bt709tenbit": dataclasses.replace(_BASE, codec="libx265", pix_fmt="yuv420p10le"),
    "bt2020pq": dataclasses.replace(
        _BASE, codec="libx265", pix_fmt="yuv420p10le", color_primaries=9, color_trc=16, colorspace=9
    ),
}
TAGS = {
    "bt709": ColourTags("bt709", "bt709", "bt709", "tv"),
    "bt601full": ColourTags("smpte170m", "smpte170m", "smpte170m", "pc"),
    "untagged": ColourTags(),
    "bt709tenbit": ColourTags("bt709", "bt709", "bt709", "tv"),
    "bt2020pq": ColourTags("bt2020", "smpte2084", "bt2020nc", "tv"),
}
"""What each source says (checked by :func:`write_sources`)."""


def write_sources(folder: str) -> dict[str, str]:
    """Every source of :data:`SOURCES` as an MP4 in ``folder``, by name."""
    os.makedirs(folder, exist_ok=True)
    paths = {}
    for name, spec in SOURCES.items():
        paths[name] = write_clip(os.path.join(folder, f"{name}.mp4"), spec)
        assert read_back(paths[name]) == TAGS[name], name
    return paths


def read_back(path: str) -> ColourTags:
    """The tags ``path`` carries: MOV from its ``colr`` box and stream range, MP4 from its stream."""
    with av.open(path) as container:
        ctx = container.streams.video[0].codec_context
        stream_tags = ColourTags.from_codes(
            ctx.color_primaries, ctx.color_trc, ctx.colorspace, ctx.color_range
        )
        mov = container.format.name.startswith("mov") and path.lower().endswith(".mov")
    if not mov:
        return stream_tags
    box = read_colr(path)
    if box is None:
        return ColourTags(range=stream_tags.range)
    assert box.kind == "nclc", box
    return dataclasses.replace(
        ColourTags.from_codes(box.primaries, box.transfer, box.matrix, 0), range=stream_tags.range
    )


def frame_tags(path: str) -> ColourTags:
    """The tags of the first decoded frame (ProRes: its frame header)."""
    with av.open(path) as container:
        frame = next(container.decode(video=0))
        return ColourTags.from_codes(
            int(frame.color_primaries), int(frame.color_trc), int(frame.colorspace), int(frame.color_range)
        )


def levels(rgb: np.ndarray) -> np.ndarray:
    """Pixels in 8-bit code values (floats; 16-bit frames scaled down)."""
    return rgb.astype(np.float64) / (257.0 if rgb.dtype == np.uint16 else 1.0)


def flat(rgb: np.ndarray, size: int = 9) -> np.ndarray:
    """Pixels whose ``size`` x ``size`` neighbourhood is flat (chroma resampling cannot move them)."""
    half = size // 2
    padded = np.pad(levels(rgb), ((half, half), (half, half), (0, 0)), mode="edge")
    windows = sliding_window_view(padded, (size, size), axis=(0, 1))
    return ((windows.max(axis=(-1, -2)) - windows.min(axis=(-1, -2))) <= 2).all(axis=-1)


def frame_errors(source: VideoInfo, output: str, tags: ColourTags) -> list[tuple[float, float, float, float]]:
    """Per frame: mean |difference| over all pixels, over flat pixels, the worst flat pixel, and the
    worst colour patch's mean difference (a wrong matrix shows there; grey does not move).

    Both are decoded with the tags they carry: the source with its own, the output with
    ``tags`` (which the caller checked are what it says), in 8-bit code values.
    """
    out = probe(output)
    described = dataclasses.replace(
        out,
        colorspace=None if tags.matrix == UNSPECIFIED else tags.matrix,
        color_range=None if tags.range == UNSPECIFIED else tags.range,
    )
    errors = []
    pairs = zip(
        decode_range(source.url, source, 0, source.frame_count),
        decode_range(output, described, 0, out.frame_count),
        strict=True,
    )
    for a, b in pairs:
        diff = np.abs(levels(a.rgb) - levels(b.rgb))
        mask = flat(a.rgb)
        patches = float(np.abs(patch_means(levels(a.rgb)) - patch_means(levels(b.rgb))).max())
        errors.append((float(diff.mean()), float(diff[mask].mean()), float(diff[mask].max()), patches))
    return errors


def assert_kept(errors: list[tuple[float, float, float, float]], what: str, *, same_samples: bool) -> None:
    """Every frame of ``errors`` (:func:`frame_errors`) is its source's picture up to rounding.

    A wrong matrix moves a colour patch's mean by 9 levels or more, a wrong range by
    13 or more.  ``same_samples``: the output is in the source's own pixel format,
    matrix and range, so the writer keeps the source's YUV samples where the frame is
    unchanged (:mod:`pipeline.video.untouched`) and a lossless output decodes equal to the
    source (x265, and x264 at 10 bit, are near-lossless at quality 0: a few hundredths of a level
    on average, a rare pixel up to four: x265 at quality 0 is not its lossless mode).  Otherwise the frame is
    converted through RGB: an 8-bit source decodes truncated to 8 bits and its 10-bit
    output more exactly, so patches move by up to 1.2 levels and single flat pixels
    by up to 1.35 (measured); the bounds leave a little room.
    """
    patch_limit, pixel_limit, flat_limit, mean_limit = (
        (0.1, 5.0, 0.05, 0.1) if same_samples else (1.5, 1.5, 0.6, 1.0)
    )
    for i, (mean, flat_mean, flat_max, patches) in enumerate(errors):
        assert (
            patches <= patch_limit
            and flat_max <= pixel_limit
            and flat_mean <= flat_limit
            and mean <= mean_limit
        ), (
            f"{what} frame {i}: patches {patches:.2f}, flat mean {flat_mean:.2f} max {flat_max:.2f}, "
            f"mean {mean:.2f} levels"
        )
