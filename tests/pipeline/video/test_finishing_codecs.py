"""ProRes 4444 / 4444 XQ (with alpha) and DNxHR HQX: encoder choice, segments, merge into MOV and MXF."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import av
import numpy as np
import pytest

from pipeline.errors import MediaError
from pipeline.video.chunking import ChunkPlan, plan_chunks
from pipeline.video.decode import decode_range
from pipeline.video.encode import EncodeSettings, choose_encoder
from pipeline.video.merge import merge_segments
from pipeline.video.probe import VideoInfo, probe
from tests.clips import ClipSpec, frame_rgb, read_index, render_identity, write_clip

W, H = 256, 120  # the smallest frame DNxHR takes


def _alpha(index: int, width: int = W, height: int = H) -> np.ndarray:
    """A moving diagonal ramp, different in every frame, full 16-bit scale."""
    y, x = np.mgrid[0:height, 0:width]
    return (((x + 2 * y + 9 * index) % 256) * 257).astype(np.uint16)


def _rgba(index: int) -> np.ndarray:
    return np.dstack((frame_rgb(index, W, H, depth=10), _alpha(index)))


@pytest.fixture(scope="module")
def alpha_source(tmp_path_factory: pytest.TempPathFactory) -> VideoInfo:
    """ProRes 4444 with a moving alpha ramp, 4:4:4 10-bit, AAC audio and timecode."""
    path = tmp_path_factory.mktemp("alpha") / "alpha.mov"
    spec = ClipSpec(
        width=W,
        height=H,
        frames=12,
        codec="prores_ks",
        pix_fmt="yuva444p10le",
        gop=None,
        options={"profile": "4444"},
    )
    return probe(write_clip(path, spec, _rgba))


@pytest.fixture(scope="module")
def plain_source(tmp_path_factory: pytest.TempPathFactory) -> VideoInfo:
    """8-bit 4:2:0 h264 without audio (MXF takes PCM audio only)."""
    path = tmp_path_factory.mktemp("plain") / "plain.mp4"
    return probe(write_clip(path, ClipSpec(width=W, height=H, frames=12, gop=4, audio=False)))


def _two_segments(info: VideoInfo) -> ChunkPlan:
    plan = plan_chunks(info, info.duration_seconds / 2 + 1e-6, min_seconds=0.05, snap_to_keyframes=False)
    assert len(plan.chunks) == 2
    return plan


def _codec_profile(path: str) -> tuple[str, str | None, str]:
    with av.open(path) as container:
        ctx = container.streams.video[0].codec_context
        return ctx.name, ctx.profile, container.format.name


def _merge_and_check(info: VideoInfo, codec: str, ext: str, tmp_path: Path) -> VideoInfo:
    choice = choose_encoder(EncodeSettings(codec=codec), info)  # type: ignore[arg-type]
    segments = render_identity(info, choice, _two_segments(info), str(tmp_path))
    out = str(tmp_path / f"out{ext}")
    stats = merge_segments(segments, info, out, audio_source_url=info.url if ext != ".mxf" else None)
    result = probe(out)
    assert stats.frames == result.frame_count == info.frame_count
    assert [p * result.time_base for p in result.pts] == [p * info.time_base for p in info.pts]
    assert result.timecode == info.timecode
    for i, frame in enumerate(decode_range(out, result, 0, result.frame_count)):
        assert read_index(frame.rgb) == i
    return result


@pytest.mark.parametrize(("codec", "profile"), [("prores_4444", "4444"), ("prores_4444xq", "XQ")])
def test_prores_4444_keeps_alpha_through_two_merged_segments(codec, profile, alpha_source, tmp_path) -> None:
    info = alpha_source
    assert info.bit_depth >= 10 and "a" in info.pix_fmt.removeprefix("yuv")[:1]
    choice = choose_encoder(EncodeSettings(codec=codec), info)
    assert (choice.name, choice.pix_fmt, choice.container) == ("prores_ks", "yuva444p10le", "mov")
    result = _merge_and_check(info, codec, ".mov", tmp_path)
    assert _codec_profile(result.url)[:2] == ("prores", profile)
    # The decoder hands ProRes 4444 back as 12 bit; the alpha plane survives.
    assert result.pix_fmt.startswith("yuva444p") and result.bit_depth >= 10
    assert len(result.audio) == 1
    pairs = zip(decode_range(info.url, info, 0, 12), decode_range(result.url, result, 0, 12), strict=True)
    for i, (src, out) in enumerate(pairs):
        assert src.alpha is not None and out.alpha is not None
        assert out.alpha.shape == (H, W) and out.alpha.dtype == np.uint16
        # ProRes alpha is lossless; each generation quantises it to 10 bits and the decoder's 12 bits
        # come back to 16 by a shift, so one generation moves it by at most ~1.25 10-bit steps.
        assert np.abs(out.alpha.astype(int) - src.alpha.astype(int)).max() <= 96
        assert np.abs(out.alpha.astype(int) - _alpha(i)).max() <= 160


def test_frames_without_alpha_stay_as_before(plain_source) -> None:
    frame = next(decode_range(plain_source.url, plain_source, 0, 1))
    assert frame.alpha is None and frame.rgb.dtype == np.uint8
    # Alpha sources into codecs without alpha: the plane is dropped, 4:4:4 ProRes stays 4444 without it.
    choice = choose_encoder(EncodeSettings(codec="prores_4444"), plain_source)
    assert (choice.pix_fmt, choice.options["profile"]) == ("yuv444p10le", "4444")


def test_existing_prores_choice_is_unchanged(alpha_source, plain_source) -> None:
    # `prores` stays 422 HQ (4444 without alpha for 4:4:4 sources), with the same options as before.
    assert choose_encoder(EncodeSettings(codec="prores"), alpha_source).options == {
        "profile": "4",
        "vendor": "apl0",
    }
    assert choose_encoder(EncodeSettings(codec="prores"), alpha_source).pix_fmt == "yuv444p10le"
    assert choose_encoder(EncodeSettings(codec="prores"), plain_source).options == {
        "profile": "3",
        "vendor": "apl0",
    }


def test_eight_bit_source_to_prores_4444_without_alpha(plain_source, tmp_path) -> None:
    result = _merge_and_check(plain_source, "prores_4444xq", ".mov", tmp_path)
    assert _codec_profile(result.url)[:2] == ("prores", "XQ")
    assert result.pix_fmt.startswith("yuv444p")  # stored 4:4:4 at 10 bits (decoded as 12)
    assert next(decode_range(result.url, result, 0, 1)).alpha is None


@pytest.mark.parametrize("ext", [".mov", ".mxf"])
def test_dnxhr_hqx_from_an_eight_bit_source(ext, plain_source, tmp_path) -> None:
    choice = choose_encoder(EncodeSettings(codec="dnxhr_hqx"), plain_source)
    assert (choice.name, choice.pix_fmt, choice.options) == ("dnxhd", "yuv422p10le", {"profile": "dnxhr_hqx"})
    result = _merge_and_check(plain_source, "dnxhr_hqx", ext, tmp_path)
    name, profile, muxer = _codec_profile(result.url)
    assert (name, profile, result.pix_fmt, result.bit_depth) == ("dnxhd", "DNXHR HQX", "yuv422p10le", 10)
    assert muxer.startswith("mov") if ext == ".mov" else muxer == "mxf"


def test_dnxhr_hqx_from_the_alpha_source_drops_alpha(alpha_source, tmp_path) -> None:
    result = _merge_and_check(alpha_source, "dnxhr_hqx", ".mov", tmp_path)
    assert result.pix_fmt == "yuv422p10le" and len(result.audio) == 1
    assert next(decode_range(result.url, result, 0, 1)).alpha is None


def test_mxf_refuses_aac_audio(alpha_source, tmp_path) -> None:
    choice = choose_encoder(EncodeSettings(codec="dnxhr_hqx"), alpha_source)
    segments = render_identity(alpha_source, choice, _two_segments(alpha_source), str(tmp_path))
    out = tmp_path / "out.mxf"
    with pytest.raises(MediaError, match="MXF holds only PCM audio, the source's is aac"):
        merge_segments(segments, alpha_source, str(out), audio_source_url=alpha_source.url)
    assert not out.exists()


def test_sizes_the_codecs_cannot_hold_are_refused(plain_source) -> None:
    with pytest.raises(MediaError, match="too small for dnxhr_hqx"):
        choose_encoder(EncodeSettings(codec="dnxhr_hqx"), dataclasses.replace(plain_source, width=160))
    with pytest.raises(MediaError, match="cannot be stored as yuv422p10le"):
        choose_encoder(
            EncodeSettings(codec="dnxhr_hqx"), dataclasses.replace(plain_source, width=321, height=241)
        )
    # 4:4:4 ProRes keeps odd sizes.
    odd = dataclasses.replace(plain_source, width=321, height=241)
    assert choose_encoder(EncodeSettings(codec="prores_4444"), odd).pix_fmt == "yuv444p10le"
    # DNxHR takes an odd height (4:2:2 subsamples only across).
    assert (
        choose_encoder(EncodeSettings(codec="dnxhr_hqx"), dataclasses.replace(odd, width=322)).name == "dnxhd"
    )


def test_mxf_refuses_variable_frame_rate(plain_source, tmp_path) -> None:
    vfr = dataclasses.replace(plain_source, is_vfr=True)
    with pytest.raises(MediaError, match="MXF needs a constant frame rate"):
        merge_segments([str(tmp_path / "seg.mov")], vfr, str(tmp_path / "out.mxf"), audio_source_url=None)
