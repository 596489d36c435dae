"""A CMX 3600 EDL of the cut, written and read by OpenTimelineIO's ``cmx_3600`` adapter: events
named only by their reel find their plates through ``edit.media.pattern``, their source timecode
placed with each plate's own header timecode."""

from __future__ import annotations

import os
from typing import Any

import opentimelineio as otio
import pytest

from cluster.edit import with_edit_shots
from cluster.spec.job import parse_spec
from pipeline.errors import SpecError
from tests.cluster.edit.cut_media import RATE, RT, TR, Media, as_reels, clip, gap, timeline, track, write_otio


def the_cut(media: Media, *extra: otio.schema.Clip) -> otio.schema.Timeline:
    """One video track: two uses of A001C003 (at 01:00:00:00) and one of B002C004 (at 02:00:00:00)."""
    a, b = media.exr, media.exr2
    return timeline(
        "ep101_edl",
        track(
            "V",
            clip("sc010", a.reference(), a.source(1005, 1012)),
            gap(3),
            clip("sc020", b.reference(), b.source(1003, 1010)),
            clip("sc010b", a.reference(), a.source(1015, 1020)),
            *extra,
        ),
    )


def write_edl(cut: otio.schema.Timeline, media: Media, path: str) -> str:
    reels = {media.exr.url: media.exr.reel, media.exr2.url: media.exr2.reel}
    text = otio.adapters.write_to_string(as_reels(cut, reels), adapter_name="cmx_3600")
    assert "* FROM CLIP:" not in text  # the events name reels only
    with open(path, "w") as fh:
        fh.write(text)
    return path


def job(media: Media, url: str, **edit: Any) -> dict[str, Any]:
    pattern = os.path.join(media.root, "reels", "{reel}", "{reel}.####.exr")
    return {
        "job_id": "edl",
        "edit": {"url": url, "handles": 2, "media": {"pattern": pattern}, **edit},
        "identities": {"hero": {"images": [media.source]}},
        "output": {"url": "/deliveries/{shot}/{shot}.####.exr"},
    }


def shots_of(data: dict[str, Any]) -> list[tuple[str | None, str | None, str]]:
    spec, _ = with_edit_shots(parse_spec(data))
    return [(s.name, s.url, str(s.frames)) for s in spec.shots]


def test_an_edl_gives_the_same_shots_as_the_otio_cut(media: Media, tmp_path) -> None:
    cut = the_cut(media)
    edl = write_edl(cut, media, str(tmp_path / "ep101.edl"))
    from_edl = shots_of(job(media, edl))
    assert from_edl == [
        ("sc010", media.exr.url, "1005-1012"),
        ("sc020", media.exr2.url, "1003-1010"),
        ("sc010b", media.exr.url, "1015-1020"),
    ]
    # The same cut as OTIO, media linked by file: the same shots.
    assert shots_of(job(media, write_otio(cut, tmp_path / "ep101.otio"))) == from_edl


def test_an_event_outside_its_plate_is_refused_naming_the_event(media: Media, tmp_path) -> None:
    b = media.exr2
    late = clip("sc030", b.reference(), b.source(1003, 1010))
    late.source_range = TR(
        otio.opentime.from_timecode("02:00:30:00", RATE), RT(8, RATE)
    )  # 30 s in: not there
    edl = write_edl(the_cut(media, late), media, str(tmp_path / "late.edl"))
    with pytest.raises(SpecError) as err:
        shots_of(job(media, edl))
    reason = err.value.reason
    assert err.value.field == "edit" and "event 4, clip 'sc030'" in reason, reason
    assert "02:00:30:00" in reason and "B002C004" in reason and "frames 1001-1012" in reason


def test_a_reel_without_media_is_offline(media: Media, tmp_path) -> None:
    ghost = clip("sc040", None, TR(otio.opentime.from_timecode("04:00:00:00", RATE), RT(8, RATE)))
    ghost.metadata["cmx_3600"] = {"reel": "Z009C009"}
    edl = write_edl(the_cut(media, ghost), media, str(tmp_path / "ghost.edl"))
    with pytest.raises(SpecError) as err:
        shots_of(job(media, edl))
    assert err.value.field == "edit.offline"
    assert "event 4, clip 'sc040'" in err.value.reason and "reel Z009C009" in err.value.reason
    skipped = shots_of(job(media, edl, offline="skip"))
    assert [name for name, _, _ in skipped] == ["sc010", "sc020", "sc010b"]


def reel_event(name: str, reel: str, timecode: str, frames: int) -> otio.schema.Clip:
    event = clip(name, None, TR(otio.opentime.from_timecode(timecode, RATE), RT(frames, RATE)))
    event.metadata["cmx_3600"] = {"reel": reel}
    return event


@pytest.mark.parametrize("kind", ["dpx", "movie"])
def test_dpx_and_movie_reels_are_placed_by_their_own_timecode(media: Media, tmp_path, kind: str) -> None:
    if kind == "dpx":  # C003C001 starts at 03:00:00:00 (DPX header): 2 frames in is frame 1003
        pattern = os.path.join(media.root, "reels", "{reel}", "{reel}.####.dpx")
        event, expected = reel_event("sc050", "C003C001", "03:00:00:02", 6), (media.dpx.url, "1003-1008")
    else:  # M30.mp4 starts at 01:00:00:00 (30 fps): 1 s in is its frame 30, 1 s of it 30 frames
        pattern = os.path.join(media.root, "{reel}.mp4")
        event, expected = reel_event("sc060", "M30", "01:00:01:00", 24), (media.movie, "30-59")
    edl = tmp_path / f"{kind}.edl"
    edl.write_text(otio.adapters.write_to_string(timeline(kind, track("V", event)), adapter_name="cmx_3600"))
    data = job(media, str(edl))
    data["edit"]["media"] = {"pattern": pattern}
    data["output"]["url"] = (
        "/deliveries/{shot}/{shot}.####.dpx" if kind == "dpx" else "/deliveries/{shot}.mp4"
    )
    assert [(url, frames) for _, url, frames in shots_of(data)] == [expected]
