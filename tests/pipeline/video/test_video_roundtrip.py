"""Chunked identity render: probe -> plan (cuts off keyframes) -> decode -> encode -> merge.

The output must be indistinguishable from the source in everything but
generation loss: frame count and order, timestamps, audio, colour tags,
rotation, timecode, colours; and the merge must be a pure stream copy.
"""

from __future__ import annotations

import os
from fractions import Fraction

import numpy as np
import pytest

from pipeline.store import storage
from pipeline.video.chunking import ChunkPlan, plan_chunks
from pipeline.video.decode import decode_range
from pipeline.video.encode import EncodeSettings, choose_encoder
from pipeline.video.merge import merge_segments
from pipeline.video.probe import VideoInfo, open_container, probe
from tests.clips import CLIPS, patch_means, read_index, render_identity

# Output codec per clip: 10-bit sources go to a codec that keeps 10 bits.
CODEC = {"ten_bit_hevc": "hevc", "ten_bit_prores": "prores"}
OUT_EXT = {"ten_bit_prores": ".mov", "no_audio": ".mkv"}


def _plan(info: VideoInfo) -> ChunkPlan:
    # A third of the clip per chunk, far below the production minimum, cut wherever it falls.
    seconds = max(info.duration_seconds / 3 + 1e-6, 0.05)
    return plan_chunks(info, seconds, min_seconds=0.05, snap_to_keyframes=False)


def _video_packets(url: str) -> list[bytes]:
    with open_container(url) as container:
        return [bytes(p) for p in container.demux(container.streams.video[0]) if p.size]


def _audio_packets(url: str) -> list[bytes]:
    with open_container(url) as container:
        if not container.streams.audio:
            return []
        return [bytes(p) for p in container.demux(container.streams.audio[0]) if p.size]


def _check_output(src: VideoInfo, out: VideoInfo, segments: list[str], out_local: str) -> None:
    assert out.frame_count == src.frame_count
    assert [p * out.time_base for p in out.pts] == [p * src.time_base for p in src.pts]
    assert out.time_base == src.time_base
    assert (out.width, out.height, out.bit_depth) == (src.width, src.height, src.bit_depth)
    assert (out.color_primaries, out.color_trc, out.colorspace, out.color_range) == (
        src.color_primaries,
        src.color_trc,
        src.colorspace,
        src.color_range,
    )
    assert out.rotation == src.rotation
    assert out.timecode == src.timecode
    # Stream copy: the output's video packets are the segments' packets, byte for byte.
    seg_packets = [pkt for seg in segments for pkt in _video_packets(seg)]
    assert _video_packets(out_local) == seg_packets
    # Audio: every source stream copied once, unchanged, and as long as the video.
    assert len(out.audio) == len(src.audio)
    if src.audio:
        assert _audio_packets(out_local) == _audio_packets(src.url)
        frame_seconds = float(1 / src.frame_rate)
        for stream in out.audio:
            assert abs(stream.duration_seconds - out.duration_seconds) <= frame_seconds
    # Pixels: every frame's drawn index, in order, and colours close to the source's.
    worst = 0.0
    src_frames = decode_range(src.url, src, 0, src.frame_count)
    for i, (a, b) in enumerate(zip(src_frames, decode_range(out.url, out, 0, out.frame_count), strict=True)):
        assert b.rgb.dtype == a.rgb.dtype
        assert read_index(b.rgb) == i
        worst = max(worst, float(np.abs(patch_means(a.rgb) - patch_means(b.rgb)).max()))
    assert worst < 4.0, f"colour drift {worst:.2f} (8-bit levels)"


@pytest.mark.parametrize("name", list(CLIPS))
def test_chunked_identity_roundtrip(name: str, clips, tmp_path) -> None:
    src = probe(clips.path(name))
    plan = _plan(src)
    if src.frame_count > 1:
        assert len(plan.chunks) >= 3
        cuts = [c.start_frame for c in plan.chunks[1:]]
        intra_only = len(src.keyframes) == src.frame_count
        if not intra_only:
            assert not set(cuts) & set(src.keyframes), "cuts must fall off keyframes"
    choice = choose_encoder(EncodeSettings(codec=CODEC.get(name, "h264"), preset="veryfast"), src)
    segments = render_identity(src, choice, plan, str(tmp_path))
    out_url = str(tmp_path / ("out" + OUT_EXT.get(name, ".mp4")))
    stats = merge_segments(segments, src, out_url, audio_source_url=src.url)
    assert stats.frames == src.frame_count and stats.bytes == os.path.getsize(out_url)
    _check_output(src, probe(out_url), segments, out_url)


def test_ten_bit_stays_ten_bit(clips, tmp_path) -> None:
    src = probe(clips.path("ten_bit_hevc"))
    assert src.bit_depth == 10
    frame = next(decode_range(src.url, src, 0, 1))
    assert frame.rgb.dtype == np.uint16 and int(frame.rgb.max()) > 255
    choice = choose_encoder(EncodeSettings(codec="h264", hardware=False), src)
    assert (choice.name, choice.pix_fmt) == ("libx264", "yuv420p10le")
    assert choose_encoder(EncodeSettings(codec="prores"), src).pix_fmt == "yuv422p10le"


def test_roundtrip_through_loopback_s3(clips, s3_bucket, tmp_path) -> None:
    local = clips.path("cfr_bframes")
    src_url = storage.join(s3_bucket, "in", "shot.mp4")
    storage.publish_file(local, src_url)
    src = probe(src_url)
    assert src.url == src_url and src.frame_count == probe(local).frame_count
    plan = _plan(src)
    choice = choose_encoder(EncodeSettings(preset="veryfast"), src)
    local_segments = render_identity(src, choice, plan, str(tmp_path))
    seg_urls = []
    for path in local_segments:
        url = storage.join(s3_bucket, "segments", os.path.basename(path))
        storage.publish_file(path, url)
        seg_urls.append(url)
    out_url = storage.join(s3_bucket, "out", "shot.mp4")
    merge_segments(seg_urls, src, out_url, audio_source_url=src_url)
    out = probe(out_url)
    out_local = str(tmp_path / "fetched.mp4")
    with storage.fetched(out_url, suffix=".mp4") as path:
        storage.publish_file(path, out_local)
    _check_output(src, out, local_segments, out_local)
    assert out.time_base == Fraction(src.time_base)
