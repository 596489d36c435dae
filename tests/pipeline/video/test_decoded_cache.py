"""DecodedCache: whole chunks admitted only when they fit, taken once, pictures counted by their planes,
and a kept picture converts to exactly the RGB decode_range gives."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.video.decode import DecodeConversion, decode_range
from pipeline.video.decoded_cache import MIB, DecodedCache, picture_bytes
from pipeline.video.probe import VideoInfo, probe


def _analyse(cache: DecodedCache, info: VideoInfo, start: int, end: int) -> bool:
    """What an actor's analysis does: decode through the collector, then admit; True: kept."""
    collector = cache.collector(info.url, info, start, end)
    if collector is None:
        return False
    for frame in collector.wrap(decode_range(info.url, info, start, end)):
        assert frame.rgb is not None  # the analysis uses the RGB; only the picture is kept
    return cache.admit(collector)


@pytest.mark.parametrize(("name", "bytes_per_pixel"), [("cfr_bframes", 1.5), ("ten_bit_hevc", 3.0)])
def test_pictures_are_counted_from_their_planes(clips, name: str, bytes_per_pixel: float) -> None:
    info = probe(clips.path(name))
    frames = list(decode_range(info.url, info, 0, 10))
    for frame in frames:
        assert frame.yuv is not None
        planes = sum(p.line_size * p.height for p in frame.yuv.planes)
        assert picture_bytes(frame.yuv) == planes
        # 4:2:0 at 8 bit is 1.5 bytes a pixel, at 10 bit (16-bit samples) 3; rows may be padded.
        assert (
            bytes_per_pixel * info.width * info.height
            <= planes
            < 2 * bytes_per_pixel * info.width * info.height
        )
    cache = DecodedCache(MIB)
    assert _analyse(cache, info, 0, 10)
    assert cache.held_bytes == sum(picture_bytes(f.yuv) for f in frames if f.yuv is not None)


@pytest.mark.parametrize("name", ["cfr_bframes", "ten_bit_hevc", "bt601_full_range"])
def test_a_kept_chunk_gives_decode_ranges_frames_exactly(clips, name: str) -> None:
    info = probe(clips.path(name))
    cache = DecodedCache(64 * MIB)
    assert _analyse(cache, info, 5, 30)
    kept = cache.take(info.url, info, 5, 30)
    assert kept is not None
    decoded = list(decode_range(info.url, info, 5, 30))
    again = list(kept.frames())
    assert [(f.index, f.pts) for f in again] == [(f.index, f.pts) for f in decoded]
    for mine, theirs in zip(again, decoded, strict=True):
        assert mine.rgb.dtype == theirs.rgb.dtype and np.array_equal(mine.rgb, theirs.rgb)
        assert mine.yuv is not None and mine.alpha is None
    # The conversion is the one decode_range uses, picture by picture.
    first = decoded[0]
    assert first.yuv is not None
    assert np.array_equal(DecodeConversion(info).to_rgb(first.yuv), first.rgb)


def test_admitted_when_it_fits_refused_when_not_and_nothing_older_is_evicted(clips) -> None:
    info = probe(clips.path("cfr_bframes"))
    one = sum(picture_bytes(f.yuv) for f in decode_range(info.url, info, 0, 10) if f.yuv is not None)
    cache = DecodedCache(one * 2 + one // 2)  # room for two 10-frame chunks, not three
    assert _analyse(cache, info, 0, 10)
    assert _analyse(cache, info, 10, 20)
    assert cache.held_bytes == 2 * one  # every frame of the clip has the same planes
    held = cache.held_bytes
    assert not _analyse(cache, info, 20, 30)  # does not fit: refused whole, the older ones stay
    assert cache.held_bytes == held and len(cache) == 2
    assert cache.take(info.url, info, 20, 30) is None
    # A chunk larger than the whole budget is refused, and the collector held no more than its room.
    small = DecodedCache(one // 2)
    collector = small.collector(info.url, info, 0, 10)
    assert collector is not None
    for _ in collector.wrap(decode_range(info.url, info, 0, 10)):
        assert collector.chunk.nbytes <= one // 2
    assert not small.admit(collector) and len(small) == 0 and small.held_bytes == 0


def test_take_removes_and_checks_the_source_description(clips) -> None:
    info = probe(clips.path("cfr_bframes"))
    cache = DecodedCache(64 * MIB)
    assert _analyse(cache, info, 0, 10)
    assert _analyse(cache, info, 10, 20)
    assert _analyse(cache, info, 20, 30)
    assert cache.take(info.url, info, 0, 10) is not None
    assert cache.take(info.url, info, 0, 10) is None  # taken once
    other = probe(clips.path("open_gop"))
    assert cache.take(info.url, other, 10, 20) is None  # another description of the source: not served
    assert len(cache) == 1
    # Rendering a later chunk of the shot releases the earlier ones (their renders went elsewhere).
    assert _analyse(cache, info, 0, 10)
    assert cache.take(info.url, info, 20, 30) is not None
    assert len(cache) == 0 and cache.held_bytes == 0


def test_disabled_cache_and_bad_budget(clips) -> None:
    info = probe(clips.path("cfr_bframes"))
    assert DecodedCache(0).collector(info.url, info, 0, 10) is None
    with pytest.raises(ValueError, match="budget_bytes"):
        DecodedCache(-1)
