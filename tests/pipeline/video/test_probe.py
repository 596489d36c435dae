"""probe(): exact frame count and timestamps from a demux pass, plus every stream property."""

from __future__ import annotations

import time
from fractions import Fraction

import av

from pipeline.store import storage
from pipeline.video.probe import probe
from tests.clips import ClipSpec, write_clip


def test_cfr_clip_is_described_exactly(clips) -> None:
    info = probe(clips.path("cfr_bframes"))
    assert info.frame_count == 75
    assert info.frame_rate == Fraction(25) and not info.is_vfr
    step = round(1 / (info.frame_rate * info.time_base))
    assert info.pts == tuple(i * step for i in range(75))
    assert info.keyframes == tuple(range(0, 75, 12))
    assert (info.codec, info.width, info.height, info.pix_fmt, info.bit_depth) == (
        "h264",
        160,
        120,
        "yuv420p",
        8,
    )
    assert (info.color_primaries, info.color_trc, info.colorspace, info.color_range) == (
        "bt709",
        "bt709",
        "bt709",
        "tv",
    )
    assert info.rotation == 0 and info.timecode == "01:00:00:00"
    assert len(info.audio) == 1 and info.audio[0].codec == "aac" and info.audio[0].sample_rate == 48000
    assert info.audio[0].channels == 1
    assert abs(info.duration_seconds - 3.0) < 1e-9
    assert info.pts_seconds(25) == 1.0


def test_vfr_clip_keeps_irregular_timestamps(clips) -> None:
    info = probe(clips.path("vfr"))
    assert info.is_vfr and info.frame_count == 60
    assert info.time_base == Fraction(1, 90000)
    durations = [b - a for a, b in zip(info.pts, info.pts[1:])]
    assert durations[:4] == [3000, 4500, 3000, 6000]


def test_ten_bit_rotation_matroska_and_no_audio(clips) -> None:
    ten = probe(clips.path("ten_bit_hevc"))
    assert (ten.codec, ten.pix_fmt, ten.bit_depth) == ("hevc", "yuv420p10le", 10)
    prores = probe(clips.path("ten_bit_prores"))
    assert (prores.codec, prores.bit_depth) == ("prores", 10)
    assert len(prores.keyframes) == prores.frame_count  # intra-only
    assert probe(clips.path("rotated")).rotation == 90
    mkv = probe(clips.path("no_audio"))  # Matroska declares no frame count: the demux pass counts
    assert mkv.frame_count == 50 and mkv.audio == () and mkv.timecode is None
    assert probe(clips.path("one_frame")).pts == (0,)


def test_probe_reads_s3_through_the_cache(clips, s3_bucket) -> None:
    url = storage.join(s3_bucket, "a.mp4")
    storage.publish_file(clips.path("cfr_bframes"), url)
    remote, local = probe(url), probe(clips.path("cfr_bframes"))
    assert remote.url == url
    assert (remote.pts, remote.keyframes, remote.audio) == (local.pts, local.keyframes, local.audio)


def test_probe_is_fast_on_a_long_clip(tmp_path) -> None:
    # 1,500 frames of a tiny picture: the demux pass cost is per packet, not per pixel.
    path = write_clip(str(tmp_path / "long.mp4"), ClipSpec(width=64, height=48, frames=1500, audio=False))
    started = time.perf_counter()
    info = probe(path)
    elapsed = time.perf_counter() - started
    assert info.frame_count == 1500
    assert elapsed < 0.5, f"probe took {elapsed:.3f} s"
    with av.open(path) as container:
        assert container.streams.video[0].frames == 1500
