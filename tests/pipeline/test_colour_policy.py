"""The output colour policy without Ray: what each codec writes, ``output.colour``'s names, the
``colr`` box, and a merge that keeps a partial description (FFmpeg alone drops it)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pydantic
import pytest

from pipeline.colour import ColourTags, OutputColour, source_tags, written_tags
from pipeline.video.chunking import plan_chunks
from pipeline.video.colr import read_colr
from pipeline.video.encode import EncodeSettings, choose_encoder
from pipeline.video.merge import merge_segments
from pipeline.video.probe import VideoInfo, probe
from tests.clips import render_identity, write_clip
from tests.colour_media import SOURCES, TAGS, assert_kept, frame_errors, frame_tags, read_back

BT709 = ColourTags("bt709", "bt709", "bt709", "tv")


@pytest.mark.parametrize(
    ("codec", "tags", "written"),
    [
        ("h264", ColourTags(), ColourTags()),  # nothing said, nothing written
        ("hevc", ColourTags(), ColourTags(range="tv")),  # x265 always states a range
        ("dnxhr_hqx", ColourTags(), ColourTags(range="tv")),
        ("prores", ColourTags(), ColourTags(range="tv")),
        ("h264", ColourTags(matrix="bt709"), ColourTags(matrix="bt709", range="tv")),  # VUI: range with colours
        ("prores_4444", ColourTags("bt709", "bt709", "bt709", "pc"), BT709),  # ProRes is limited range only
        ("hevc", ColourTags("bt2020", "smpte2084", "bt2020nc", "pc"), ColourTags("bt2020", "smpte2084", "bt2020nc", "pc")),
        ("dnxhr_hqx", ColourTags("smpte170m", "smpte170m", "smpte170m", "pc"), ColourTags("smpte170m", "smpte170m", "smpte170m", "pc")),
    ],
)  # fmt: skip
def test_written_tags_are_the_sources_as_each_codec_can_say_them(codec, tags, written) -> None:
    assert written_tags(codec, tags) == written


def test_output_colour_names_are_ffmpegs() -> None:
    colour = OutputColour(primaries="bt2020", transfer="smpte2084", matrix="bt2020nc", range="pc")
    assert colour.over(ColourTags()) == ColourTags("bt2020", "smpte2084", "bt2020nc", "pc")
    assert OutputColour(matrix="unspecified").over(BT709) == dataclasses.replace(BT709, matrix="unspecified")
    assert OutputColour(transfer="smpte2084").over(BT709) == dataclasses.replace(BT709, transfer="smpte2084")
    for field, value, words in [
        ("primaries", "rec709", "'rec709' is not an FFmpeg primaries name"),
        ("transfer", "pq", "'pq' is not an FFmpeg transfer name"),
        ("matrix", "ycgco", "'ycgco' cannot be converted to"),
        ("matrix", "bt2020c", "'bt2020c' cannot be converted to"),
        ("range", "full", "'full' is not an FFmpeg range name; use one of tv, pc or unspecified"),
    ]:
        with pytest.raises(pydantic.ValidationError, match=words):
            OutputColour(**{field: value})
    assert OutputColour(range="pc").range_problem("prores") == "prores stores limited range only; use tv"
    assert (
        OutputColour(range="unspecified").range_problem("hevc") == "hevc always states a range; use tv or pc"
    )
    assert OutputColour(range="pc").range_problem("h264") is None


def _merged(info: VideoInfo, settings: EncodeSettings, folder: Path, ext: str) -> str:
    choice = choose_encoder(settings, info)
    plan = plan_chunks(info, info.duration_seconds / 2 + 1e-6, min_seconds=0.05, snap_to_keyframes=False)
    assert len(plan.chunks) == 2
    folder.mkdir()
    segments = render_identity(info, choice, plan, str(folder))
    out = str(folder / f"out{ext}")
    merge_segments(segments, info, out, audio_source_url=None)
    return out


@pytest.mark.parametrize(("codec", "ext"), [("prores", ".mov"), ("h264", ".mp4"), ("dnxhr_hqx", ".mov")])
def test_a_partial_description_survives_segments_and_merge(codec, ext, tmp_path) -> None:
    # Only the matrix is tagged: FFmpeg writes a colr box only when all three are known.
    spec = dataclasses.replace(SOURCES["bt709"], color_primaries=2, color_trc=2)
    info = probe(write_clip(tmp_path / "partial.mp4", spec))
    assert (info.color_primaries, info.color_trc, info.colorspace, info.color_range) == (
        None,
        None,
        "bt709",
        "tv",
    )
    out = _merged(info, EncodeSettings(codec=codec, quality=0, hardware=False), tmp_path / codec, ext)
    want = ColourTags(matrix="bt709", range="tv")
    box = read_colr(out)
    assert box is not None and (box.primaries, box.transfer, box.matrix) == (2, 2, 1)
    assert read_back(out) == want
    if codec == "prores":
        assert frame_tags(out) == want


def test_an_untagged_dnxhr_output_says_nothing_whatever_the_decoder_fills_in(tmp_path) -> None:
    info = probe(write_clip(tmp_path / "untagged.mp4", SOURCES["untagged"]))
    out = _merged(info, EncodeSettings(codec="dnxhr_hqx"), tmp_path / "dnxhr", ".mov")
    assert read_colr(out) is None  # FFmpeg's DNxHR decoder reports bt709 for it; the file says nothing
    assert read_back(out) == ColourTags(range="tv")


@pytest.mark.parametrize("name", ["untagged", "bt601full"])
def test_a_dnxhr_source_is_read_as_its_colr_box_describes_it(name, tmp_path) -> None:
    # FFmpeg's DNxHR decoder reports BT.709 for any file; probe reads the file's own box instead,
    # so an untagged DNxHR plate stays untagged through a job (and H.264 from it says nothing).
    info = probe(write_clip(tmp_path / f"{name}.mp4", SOURCES[name]))
    dnxhr = probe(_merged(info, EncodeSettings(codec="dnxhr_hqx"), tmp_path / "dnxhr", ".mov"))
    want = dataclasses.replace(TAGS[name], range=TAGS[name].range if name == "bt601full" else "tv")
    assert source_tags(dnxhr) == want
    out = _merged(dnxhr, EncodeSettings(codec="h264", quality=0, hardware=False), tmp_path / "h264", ".mp4")
    back = read_back(out)
    if name == "bt601full":
        assert back == want
    else:  # H.264 says a limited range only together with a colour description
        assert not back.describes_colour() and back.range in ("tv", "unspecified"), back


def test_the_override_converts_with_the_matrix_and_range_it_writes(tmp_path) -> None:
    info = probe(write_clip(tmp_path / "bt709.mp4", SOURCES["bt709tenbit"]))
    override = OutputColour(primaries="bt2020", transfer="smpte2084", matrix="bt2020nc", range="pc")
    settings = EncodeSettings(codec="h264", quality=0, preset="ultrafast", hardware=False, colour=override)
    assert choose_encoder(settings, info).colour == ColourTags("bt2020", "smpte2084", "bt2020nc", "pc")
    out = _merged(info, settings, tmp_path / "h264", ".mp4")
    want = ColourTags("bt2020", "smpte2084", "bt2020nc", "pc")
    assert read_back(out) == want
    box = read_colr(out)
    assert box is not None and box.kind == "nclx" and box.full_range
    assert_kept(frame_errors(info, out, want), "h264 with output.colour", same_samples=False)


@pytest.mark.parametrize("name", ["bt709tenbit", "bt601full"])
def test_prores_frame_headers_state_the_sources_colour(name, tmp_path) -> None:
    # Before: prores_ks wrote each frame's own (unset) primaries and transfer, and a full-range
    # source was stored full range in a codec that only has limited.
    info = probe(write_clip(tmp_path / f"{name}.mp4", SOURCES[name]))
    out = _merged(info, EncodeSettings(codec="prores"), tmp_path / "prores", ".mov")
    want = dataclasses.replace(TAGS[name], range="tv")
    assert frame_tags(out) == read_back(out) == want
    assert_kept(frame_errors(info, out, want), f"prores {name}", same_samples=False)
