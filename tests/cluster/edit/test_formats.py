"""The cut in its other forms: Final Cut Pro 7 XML (``fcp_xml``) read and written back, a timeline
on an object store, and media paths relative to the timeline's folder."""

from __future__ import annotations

import os
from typing import Any

import fsspec
import opentimelineio as otio
import pytest

from cluster.edit import with_edit_shots, write_timeline
from cluster.spec.job import parse_spec
from cluster.spec.shot_refs import expand_shots
from pipeline.errors import SpecError
from tests.cluster.edit.cut_media import RATE, RT, TR, Media, clip, gap, timeline, track, write_otio

MOVIE_AT_1H = otio.opentime.from_timecode("01:00:00:00", 30)


def movie_cut(media: Media) -> otio.schema.Timeline:
    """Two uses of the 30 fps movie in a 24 fps cut: its frames 30-59 and 60-74."""
    start = MOVIE_AT_1H.rescaled_to(RATE)

    def ref() -> otio.schema.ExternalReference:
        return otio.schema.ExternalReference(
            target_url=media.movie, available_range=TR(MOVIE_AT_1H, RT(90, 30))
        )

    return timeline(
        "ep101_fcp",
        track(
            "V1",
            clip("mov_a", ref(), TR(start + RT(24, RATE), RT(24, RATE))),
            gap(5),
            clip("mov_b", ref(), TR(start + RT(48, RATE), RT(12, RATE))),
        ),
    )


def spec_for(media: Media, url: str, tmp_path, **output: Any) -> dict[str, Any]:
    return {
        "job_id": "formats",
        "edit": {"url": url, "handles": 4},
        "identities": {"hero": {"images": [media.source]}},
        "output": {"url": str(tmp_path / "out" / "{shot}.mp4"), **output},
    }


def test_fcp_xml_is_read_and_written_back(media: Media, tmp_path) -> None:
    xml = str(tmp_path / "ep101.xml")
    otio.adapters.write_to_file(movie_cut(media), xml)
    back_url = str(tmp_path / "ep101_recast.xml")
    spec, plan = with_edit_shots(parse_spec(spec_for(media, xml, tmp_path, timeline_url=back_url)))
    assert plan is not None
    assert [(s.name, s.url, str(s.frames), s.handles) for s in spec.shots] == [
        ("mov_a", media.movie, "30-59", 4),
        ("mov_b", media.movie, "60-74", 4),
    ]
    outputs = {r.name: r.output_url for r in expand_shots(spec)}
    write_timeline(plan, outputs, include_handles=True, overwrite=False)
    back = {c.name: c for c in otio.adapters.read_from_file(back_url).find_clips()}
    for name, first, last in (("mov_a", 30, 59), ("mov_b", 60, 74)):
        ref = back[name].media_reference
        assert ref.target_url == outputs[name]
        # The output starts 4 handle frames (at 30 fps) before the clip; FCP 7 XML states every time
        # in the sequence's 24 fps, so it comes back to the nearest timeline frame.
        offset = back[name].source_range.start_time - ref.available_range.start_time
        assert abs(offset.to_seconds() - 4 / 30) <= 1 / 24, name
        assert ref.available_range.duration.to_seconds() == pytest.approx((last - first + 9) / 30, abs=1 / 24)


def test_fcp_xml_cannot_hold_image_sequences_said_before_ray(media: Media, tmp_path) -> None:
    from cluster.edit import check_timeline_output

    cut = movie_cut(media)
    cut.tracks[0].append(clip("plate", media.exr.reference(), media.exr.source(1001, 1004)))
    data = spec_for(
        media, write_otio(cut, tmp_path / "cut.otio"), tmp_path, timeline_url=str(tmp_path / "b.xml")
    )
    data["shots"] = [{"name": "plate", "output": str(tmp_path / "out" / "plate" / "plate.####.exr")}]
    spec, plan = with_edit_shots(parse_spec(data))
    assert plan is not None
    with pytest.raises(SpecError) as err:
        check_timeline_output(plan, {r.name: r.output_url for r in expand_shots(spec)}, include_handles=True)
    assert err.value.field == "output.timeline_url" and "movie clips only" in err.value.reason


def test_a_timeline_on_an_object_store(media: Media, s3_bucket: str, tmp_path) -> None:
    local = write_otio(movie_cut(media), tmp_path / "ep101.otio")
    remote = f"{s3_bucket}/editorial/ep101.otio"
    fsspec.filesystem("s3", skip_instance_cache=True).put_file(local, remote.removeprefix("s3://"))
    from_s3, _ = with_edit_shots(parse_spec(spec_for(media, remote, tmp_path)))
    from_disk, _ = with_edit_shots(parse_spec(spec_for(media, local, tmp_path)))
    assert from_s3.shots == from_disk.shots and len(from_s3.shots) == 2


def test_media_paths_are_relative_to_the_timeline(media: Media, tmp_path) -> None:
    ref = media.exr.reference()
    ref.target_url_base = os.path.relpath(ref.target_url_base, media.root)  # reels/A001C003/
    cut = timeline("relative", track("V1", clip("sc010", ref, media.exr.source(1005, 1012))))
    url = write_otio(cut, os.path.join(media.root, f"relative-{os.getpid()}.otio"))
    data = spec_for(media, url, tmp_path)
    data["output"]["url"] = str(tmp_path / "out" / "{shot}" / "{shot}.####.exr")
    spec, _ = with_edit_shots(parse_spec(data))
    assert [(s.url, str(s.frames)) for s in spec.shots] == [(media.exr.url, "1005-1012")]


def test_an_aaf_cut_gives_the_same_shots(media: Media, tmp_path) -> None:
    """A real AAF file (written by the adapter from the cut; its media as ``file://`` URLs) read through
    the ``aaf`` extra, which the test extra installs."""
    pytest.importorskip("otio_aaf_adapter", reason="the 'aaf' extra (otio-aaf-adapter) is not installed")
    aaf = str(tmp_path / "ep101.aaf")
    cut = movie_cut(media)
    for each in cut.find_clips():  # AAF states every time in the composition's rate (24 fps)
        ref = each.media_reference
        ref.available_range = TR(ref.available_range.start_time.rescaled_to(RATE), RT(72, RATE))
    otio.adapters.write_to_file(cut, aaf, use_empty_mob_ids=True)
    with open(aaf, "rb") as fh:
        assert fh.read(8) == bytes.fromhex("d0cf11e0a1b11ae1")  # a structured storage (AAF) file
    spec, plan = with_edit_shots(parse_spec(spec_for(media, aaf, tmp_path)))
    assert plan is not None
    assert [(s.name, s.url, str(s.frames), s.handles) for s in spec.shots] == [
        ("mov_a", media.movie, "30-59", 4),
        ("mov_b", media.movie, "60-74", 4),
    ]


def test_media_in_a_one_process_store_is_unusable(media: Media, tmp_path) -> None:
    """A clip on ``memory://`` (fsspec's store inside one process, that no actor shares) is refused
    naming the clip, as ``output.url: memory://`` is at the spec boundary (issue 41)."""
    ref = otio.schema.ExternalReference(target_url="memory://plates/M30.mp4")
    cut = timeline("memory", track("V1", clip("sc020", ref, TR(RT(0, 30), RT(10, 30)))))
    url = write_otio(cut, str(tmp_path / "memory.otio"))
    with pytest.raises(SpecError) as err:
        with_edit_shots(parse_spec(spec_for(media, url, tmp_path)))
    assert err.value.field == "edit.offline"
    assert (
        "clip 'sc020'" in err.value.reason and "memory:// is a store inside one process" in err.value.reason
    )


@pytest.mark.parametrize(
    "target", ["s3://jdoe@studio.com:Tail9Pw@bucket/plate.mp4", "s3://bucket@AKIAQ:Tail9Pw@bucket2/p.mp4"]
)
def test_media_with_credentials_in_its_url_is_unusable_and_never_printed(
    media: Media, tmp_path, target
) -> None:
    """A password in a clip's media URL is refused before any store sees it (whose errors would echo
    it: an independent audit saw botocore print 'Invalid bucket name "jdoe@studio.com:Tail9Pw@bucket"')."""
    ref = otio.schema.ExternalReference(target_url=target)
    cut = timeline("creds", track("V1", clip("sc030", ref, TR(RT(0, 30), RT(10, 30)))))
    url = write_otio(cut, str(tmp_path / "creds.otio"))
    with pytest.raises(SpecError) as err:
        with_edit_shots(parse_spec(spec_for(media, url, tmp_path)))
    assert err.value.field == "edit.offline" and "credentials do not belong in a URL" in err.value.reason
    assert "Tail9Pw" not in str(err.value)
