"""Encoder choice, segment writing and the stream-copy merge (and how they refuse bad input)."""

from __future__ import annotations

import dataclasses
import os

import pydantic
import pytest

from pipeline.errors import MediaError, SpecError
from pipeline.video.chunking import plan_chunks
from pipeline.video.decode import decode_range
from pipeline.video.encode import EncodeSettings, SegmentWriter, can_open, choose_encoder
from pipeline.video.merge import merge_segments
from pipeline.video.probe import probe
from tests.clips import render_identity


def test_settings_are_validated() -> None:
    with pytest.raises(pydantic.ValidationError):
        EncodeSettings(quality=60)
    with pytest.raises(pydantic.ValidationError):
        EncodeSettings(preset="warp")
    with pytest.raises(pydantic.ValidationError):
        EncodeSettings(codec="vp9")  # type: ignore[arg-type]


def test_choice_falls_back_to_software_when_nvenc_does_not_open(clips) -> None:
    info = probe(clips.path("cfr_bframes"))
    choice = choose_encoder(EncodeSettings(), info)
    if can_open("h264_nvenc", "yuv420p"):
        assert choice.name == "h264_nvenc" and choice.hardware
    else:
        assert choice.name == "libx264" and not choice.hardware
    assert choice.pix_fmt == "yuv420p" and "open-gop=0" in choice.options["x264-params"]
    hevc = choose_encoder(EncodeSettings(codec="hevc", hardware=False), info)
    assert hevc.name == "libx265" and "open-gop=0" in hevc.options["x265-params"]
    prores = choose_encoder(EncodeSettings(codec="prores"), info)
    assert (prores.name, prores.pix_fmt, prores.options["profile"], prores.container) == (
        "prores_ks",
        "yuv422p10le",
        "3",
        "mov",
    )


def test_odd_size_keeps_its_size_in_444_and_refuses_420(clips) -> None:
    info = probe(clips.path("odd_size"))
    assert choose_encoder(EncodeSettings(hardware=False), info).pix_fmt == "yuv444p"
    as_420 = dataclasses.replace(info, pix_fmt="yuv420p")
    with pytest.raises(MediaError, match="321x241"):
        choose_encoder(EncodeSettings(hardware=False), as_420)


def test_segments_start_with_an_idr_and_join(clips, tmp_path) -> None:
    import av

    info = probe(clips.path("cfr_bframes"))
    plan = plan_chunks(info, 1.0, min_seconds=0.5, snap_to_keyframes=False)
    choice = choose_encoder(EncodeSettings(preset="veryfast"), info)
    segments = render_identity(info, choice, plan, str(tmp_path))
    extradata = set()
    for path in segments:
        with av.open(path) as container:
            stream = container.streams.video[0]
            extradata.add(bytes(stream.codec_context.extradata))
            first = next(p for p in container.demux(stream) if p.size)
            assert first.is_keyframe
            nal_types = []
            data, i = bytes(first), 0
            while i + 4 <= len(data):
                size = int.from_bytes(data[i : i + 4], "big")
                nal_types.append(data[i + 4] & 31)
                i += 4 + size
            assert 5 in nal_types  # IDR slice
    assert len(extradata) == 1


def test_writer_rejects_out_of_order_and_incomplete_segments(clips, tmp_path) -> None:
    info = probe(clips.path("cfr_bframes"))
    chunk = plan_chunks(info, 1.0, min_seconds=0.5).chunks[0]
    choice = choose_encoder(EncodeSettings(preset="ultrafast"), info)
    frames = list(decode_range(info.url, info, chunk.start_frame, chunk.start_frame + 3))
    path = str(tmp_path / "seg.mp4")
    writer = SegmentWriter(path, info, choice, chunk)
    with pytest.raises(MediaError, match="out of order"):
        writer.write(frames[1])
    writer.write(frames[0])
    with pytest.raises(MediaError, match="incomplete"):
        writer.close()
    assert not os.path.exists(path)


def test_failed_merges_leave_nothing_behind(clips, tmp_path) -> None:
    info = probe(clips.path("cfr_bframes"))
    plan = plan_chunks(info, 1.0, min_seconds=0.5, snap_to_keyframes=False)
    choice = choose_encoder(EncodeSettings(preset="veryfast"), info)
    segments = render_identity(info, choice, plan, str(tmp_path))
    out = str(tmp_path / "out.mp4")
    with pytest.raises(MediaError, match="frames"):
        merge_segments(segments[:1] + segments[2:], info, out, audio_source_url=info.url)
    assert not os.path.exists(out)
    # A segment encoded with different settings cannot be joined by copy.
    other = dataclasses.replace(choice, options={**choice.options, "crf": "30"})
    odd_dir = tmp_path / "other"
    odd_dir.mkdir()
    mixed = render_identity(info, other, plan, str(odd_dir))
    with pytest.raises(MediaError, match="headers differ"):
        merge_segments([segments[0], mixed[1], segments[2]], info, out, audio_source_url=None)
    assert not os.path.exists(out)
    assert [n for n in os.listdir(tmp_path) if n.startswith(".out")] == []
    with pytest.raises(SpecError):
        merge_segments(segments, info, str(tmp_path / "out.avi"), audio_source_url=None)


def test_merge_into_mov_and_mkv_without_audio(clips, tmp_path) -> None:
    info = probe(clips.path("cfr_bframes"))
    plan = plan_chunks(info, 1.0, min_seconds=0.5, snap_to_keyframes=False)
    choice = choose_encoder(EncodeSettings(preset="veryfast"), info)
    segments = render_identity(info, choice, plan, str(tmp_path))
    for ext in (".mov", ".mkv"):
        out = str(tmp_path / f"out{ext}")
        stats = merge_segments(segments, info, out, audio_source_url=None)
        result = probe(out)
        assert stats.frames == result.frame_count == info.frame_count
        assert [p * result.time_base for p in result.pts] == [p * info.time_base for p in info.pts]
        assert result.audio == () and result.timecode == info.timecode
