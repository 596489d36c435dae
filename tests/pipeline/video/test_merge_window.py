"""Delivering a frame range [a, b) of a shot: rebased timestamps, offset timecode, trimmed audio."""

from __future__ import annotations

import itertools
from fractions import Fraction
from pathlib import Path

import av
import pytest

from pipeline.errors import MediaError, SpecError
from pipeline.video.chunking import Chunk, ChunkPlan
from pipeline.video.decode import decode_range
from pipeline.video.encode import EncodeSettings, choose_encoder
from pipeline.video.merge import delivery, merge_segments
from pipeline.video.probe import VideoInfo, open_container, probe
from tests.clips import ClipSpec, read_index, render_identity, write_clip

AAC_PACKET_SECONDS = 1024 / 48000


def _window_plan(info: VideoInfo, cuts: list[int]) -> ChunkPlan:
    """Chunks cut at ``cuts`` (first and last: the window's ends), as a windowed render makes them."""
    ends = [*info.pts, info.end_pts()]
    chunks = tuple(Chunk(n, a, b, info.pts[a], ends[b]) for n, (a, b) in enumerate(itertools.pairwise(cuts)))
    return ChunkPlan(frame_count=cuts[-1] - cuts[0], chunks=chunks)


def _audio_span(url: str) -> tuple[float, float]:
    """Start and end (seconds) of the first audio stream's packets."""
    with open_container(url) as container:
        stream = container.streams.audio[0]
        tb = stream.time_base
        assert tb is not None
        spans = [(p.pts * tb, (p.pts + (p.duration or 0)) * tb) for p in container.demux(stream) if p.size]
    return float(min(s for s, _ in spans)), float(max(e for _, e in spans))


def _render_window(info: VideoInfo, cuts: list[int], workdir: Path) -> list[str]:
    choice = choose_encoder(EncodeSettings(preset="ultrafast", hardware=False), info)
    return render_identity(info, choice, _window_plan(info, cuts), str(workdir))


def _check_window(src: VideoInfo, out_url: str, a: int, b: int) -> VideoInfo:
    out = probe(out_url)
    span = delivery(src, (a, b))
    assert out.frame_count == span.frame_count == b - a
    # First frame at 0, the source's own spacing after it (VFR too).
    assert out.pts[0] == 0
    assert [p * out.time_base for p in out.pts] == [(p - src.pts[a]) * src.time_base for p in src.pts[a:b]]
    assert out.timecode == span.timecode
    # The last frame's duration is the segment encoder's guess (VFR: not the source's last step).
    longest_step = max(float((q - p) * src.time_base) for p, q in itertools.pairwise(src.pts))
    assert abs(out.duration_seconds - span.duration_seconds) <= longest_step
    for i, frame in enumerate(decode_range(out_url, out, 0, out.frame_count)):
        assert read_index(frame.rgb) == a + i
    assert len(out.audio) == len(src.audio) == 1
    # Audio covers the video's span, give or take one packet at each end.
    start, end = _audio_span(out_url)
    assert -AAC_PACKET_SECONDS <= start <= 0
    assert span.duration_seconds <= end <= span.duration_seconds + AAC_PACKET_SECONDS
    assert abs(out.audio[0].duration_seconds - out.duration_seconds) <= AAC_PACKET_SECONDS
    return out


@pytest.mark.parametrize(
    ("clip", "ext", "cuts"),
    [
        ("cfr_bframes", ".mp4", [13, 25, 38, 47]),
        ("cfr_bframes", ".mov", [30, 50, 75]),  # to the source's last frame
        ("vfr", ".mov", [7, 21, 33]),
        ("cfr_bframes", ".mkv", [0, 20, 31]),  # from the first frame
    ],
)
def test_window_delivers_exactly_the_range(clip: str, ext: str, cuts: list[int], clips, tmp_path) -> None:
    src = probe(clips.path(clip))
    assert src.timecode == "01:00:00:00" and src.audio
    a, b = cuts[0], cuts[-1]
    segments = _render_window(src, cuts, tmp_path)
    out_url = str(tmp_path / f"out{ext}")
    stats = merge_segments(segments, src, out_url, audio_source_url=src.url, window=(a, b))
    assert stats.frames == b - a
    out = _check_window(src, out_url, a, b)
    rate = round(src.frame_rate)
    assert out.timecode == f"01:00:{a // rate:02d}:{a % rate:02d}"


def test_drop_frame_timecode_advances_across_the_minute(tmp_path) -> None:
    spec = ClipSpec(frames=40, rate=Fraction(30000, 1001), timecode="00:00:59;20")
    src = probe(write_clip(tmp_path / "ntsc.mov", spec))
    assert src.timecode == "00:00:59;20"
    segments = _render_window(src, [12, 20, 30], tmp_path)
    out_url = str(tmp_path / "out.mov")
    merge_segments(segments, src, out_url, audio_source_url=src.url, window=(12, 30))
    out = _check_window(src, out_url, 12, 30)
    assert out.timecode == delivery(src, (12, 30)).timecode == "00:01:00;04"  # ;00 and ;01 do not exist


def test_without_window_the_output_is_the_whole_source_as_before(clips, tmp_path) -> None:
    src = probe(clips.path("cfr_bframes"))
    segments = _render_window(src, [0, 25, 50, src.frame_count], tmp_path)
    whole = delivery(src)
    assert (whole.first_frame, whole.frame_count, whole.timecode) == (0, src.frame_count, src.timecode)
    out_url = str(tmp_path / "out.mp4")
    merge_segments(segments, src, out_url, audio_source_url=src.url)
    out = probe(out_url)
    assert [p * out.time_base for p in out.pts] == [p * src.time_base for p in src.pts]
    assert out.timecode == src.timecode
    # The source audio is copied whole, priming packet included.
    with av.open(out_url) as result, av.open(src.url) as source:
        copied = [bytes(p) for p in result.demux(result.streams.audio[0]) if p.size]
        original = [bytes(p) for p in source.demux(source.streams.audio[0]) if p.size]
    assert copied == original


def test_window_errors(clips, tmp_path) -> None:
    src = probe(clips.path("cfr_bframes"))
    for bad in [(10, 10), (-1, 5), (70, 76)]:
        with pytest.raises(SpecError, match="window"):
            delivery(src, bad)
    segments = _render_window(src, [10, 20, 30], tmp_path)
    with pytest.raises(MediaError, match=r"segments hold 20 frames, the window \(10, 31\) has 21"):
        merge_segments(segments, src, str(tmp_path / "o.mp4"), audio_source_url=None, window=(10, 31))
    with pytest.raises(MediaError, match="exceed the window"):
        merge_segments(segments, src, str(tmp_path / "o.mp4"), audio_source_url=None, window=(10, 25))
