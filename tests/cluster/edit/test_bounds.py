"""The scans that bound an editorial document before OpenTimelineIO reads it (:mod:`cluster.edit.bounds`),
and the linear steps of turning a large cut into shots (the overlap sweep, the names)."""

from __future__ import annotations

import json
import random
import re

import pytest

from cluster.edit import bounds
from cluster.edit.bounds import MAX_NESTING, Counts, check_document, json_counts, json_depth
from cluster.edit.cut import CutItem
from cluster.edit.media import ClipMedia, MediaClock
from cluster.edit.plan import SHOWN, ClipShot, _overlaps
from pipeline.errors import SpecError
from tests.cluster.edit.cut_media import RT


@pytest.mark.parametrize(
    "value",
    [
        [],
        {"a": [1, {"b": [[[]]]}]},
        {"name": "[[[[{{{{ not nesting ]]", "q": 'a "quoted" [word] \\ and \\"[[['},
        [[["\\"], 'x\\"[[\\']],
        {"deep": json.loads("[" * 60 + "]" * 60)},
    ],
)
def test_json_depth_counts_nesting_and_never_brackets_inside_strings(value) -> None:
    def depth(v) -> int:
        if isinstance(v, list):
            return 1 + max((depth(x) for x in v), default=0)
        if isinstance(v, dict):
            return 1 + max((depth(x) for x in v.values()), default=0)
        return 0

    assert json_depth(json.dumps(value).encode()) == depth(value)


def test_json_depth_is_linear_on_an_unclosed_string_and_huge_nesting() -> None:
    # A string never closed is no string: its brackets count, so such a document is refused, not read.
    assert json_depth(b'{"a": "' + b"[" * 1_000_000) == 1_000_001
    assert json_depth(b"[" * 5_000_000) == 5_000_000


def test_otio_counts_clips_markers_and_objects() -> None:
    import opentimelineio as otio

    track = otio.schema.Track()
    for i in range(3):
        clip = otio.schema.Clip(name=f"c{i}", source_range=otio.opentime.TimeRange(RT(0, 24), RT(5, 24)))
        clip.markers.append(otio.schema.Marker(name="note"))
        track.append(clip)
    counts = json_counts(otio.schema.Timeline(tracks=[track]).to_json_string().encode())
    assert (counts.clips, counts.markers) == (3, 3)
    assert counts.objects >= 3 + 3 + 2 and 4 <= counts.depth < 20


def test_bounds_name_the_field_the_file_and_the_count(monkeypatch) -> None:
    with pytest.raises(SpecError) as err:
        check_document(b"[" * (MAX_NESTING + 1), "otio_json", field="edit.url", url="cut.otio")
    assert (
        err.value.field == "edit.url" and f"cut.otio is nested deeper than {MAX_NESTING}" in err.value.reason
    )
    monkeypatch.setattr(bounds, "MAX_CLIPS", 2)
    edl = b"TITLE: x\n001  R1 V C 01:00:00:00 01:00:00:01 01:00:00:00 01:00:00:01\n" * 3
    with pytest.raises(SpecError) as err:
        check_document(edl, "cmx_3600", field="edit.url", url="cut.edl")
    assert "cut.edl holds 3 clips (events), more than the 2" in err.value.reason
    monkeypatch.setattr(bounds, "MAX_MARKERS", 1)
    with pytest.raises(SpecError) as err:
        check_document(b"<xmeml><marker/><marker/></xmeml>", "fcp_xml", field="edit.url", url="cut.xml")
    assert "cut.xml holds more than the 1 markers" in err.value.reason  # counting stops at the bound
    assert check_document(b"\x00AAF", "AAF", field="edit.url", url="cut.aaf") == Counts(0, 0, 0, 0)


@pytest.mark.parametrize(
    ("xml", "said"),
    [
        (b'<!DOCTYPE x [<!ENTITY a "lol">]><xmeml>&a;</xmeml>', "declares XML entities"),
        (
            b'<!DOCTYPE x [<!entity e SYSTEM "file:///etc/hostname">]><xmeml>&e;</xmeml>',
            "declares XML entities",
        ),
        (b"<xmeml>" + b"<a>" * (MAX_NESTING + 1), f"nested deeper than {MAX_NESTING}"),
        (b"<xmeml><sequence></xmeml>", "not well-formed XML"),
    ],
)
def test_fcp_xml_scan_refuses_entities_depth_and_broken_xml(xml, said) -> None:
    with pytest.raises(SpecError) as err:
        check_document(xml, "fcp_xml", field="edit.url", url="cut.xml")
    assert err.value.field == "edit.url" and "cut.xml" in err.value.reason and said in err.value.reason


def shot(index: int, url: str, first: int, last: int) -> ClipShot:
    where = CutItem(track="V1", track_index=0, item_index=index, name=f"c{index}", record="01:00:00:00")
    clock = MediaClock(24.0, RT(0, 24), 0, (0, 100_000))
    return ClipShot(where, f"c{index}", ClipMedia(url, False, clock, first, last), 0)


def test_overlaps_found_by_the_sweep_are_those_of_every_pair() -> None:
    """The sweep names real overlapping pairs (the earlier clip first) and counts all of them, as a
    comparison of every pair would."""
    rng = random.Random(7)
    for n in (0, 1, 5, 40, 300):
        clips = []
        for i in range(n):
            first = rng.randrange(0, 400)
            clips.append(shot(i, f"m{rng.randrange(3)}.mov", first, first + rng.randrange(0, 30)))
        every = [
            (a, b)
            for i, a in enumerate(clips)
            for b in clips[i + 1 :]
            if a.media.url == b.media.url and a.media.first <= b.media.last and b.media.first <= a.media.last
        ]
        notes = _overlaps(clips)
        named = [n for n in notes if n.startswith("clips ")]
        assert len(named) == min(len(every), SHOWN)
        pairs = {(a.shot, b.shot) for a, b in every}
        for note in named:
            one, other = re.findall(r"clips (\S+) .* and (\S+) \(", note)[0]
            assert (one, other) in pairs, note
        rest = len(every) - len(named)
        assert (f"and {rest:,} more pairs" in notes[-1]) if rest else len(notes) == len(named)


@pytest.mark.parametrize(
    "eol", [b"\n", b"\r", b"\r\n", b"\x0b", b"\x0c", b"\x1e", "\u2028".encode(), "\x85".encode()]
)
def test_an_edl_is_bounded_in_lines_as_well_as_events(monkeypatch, eol) -> None:
    """OpenTimelineIO's EDL reader is Python: comment lines cost time as events do, and it splits lines
    at every break ``str.splitlines()`` knows (an independent audit passed 300,000 lines joined by CR)."""
    monkeypatch.setattr(bounds, "MAX_EDL_LINES", 100)
    edl = b"TITLE: x" + eol + (b"* FROM CLIP NAME: a comment, not an event" + eol) * 150
    assert len(edl.decode().splitlines()) == 151
    with pytest.raises(SpecError) as err:
        check_document(edl, "cmx_3600", field="edit.url", url="cut.edl")
    assert "cut.edl holds 152 lines, more than the 100" in err.value.reason
    monkeypatch.setattr(bounds, "MAX_CLIPS", 2)
    events = eol.join([b"TITLE: x", *[b"001  R1 V C 01:00:00:00 01:00:00:01 01:00:00:00 01:00:00:01"] * 3])
    with pytest.raises(SpecError) as err:
        check_document(events, "cmx_3600", field="edit.url", url="cut.edl")
    assert "cut.edl holds 3 clips (events)" in err.value.reason
