"""Bounds on an editorial document, checked on its bytes before OpenTimelineIO sees them.

OpenTimelineIO's readers recurse: its JSON reader (C++) ends the process with SIGSEGV on a
document nested some 100,000 levels deep, and holds the interpreter (no signal is handled) for
minutes on one nested 20,000 deep.  So every timeline is scanned here first, in time linear in its
size and without recursion, and refused (a SpecError naming the field and the file) when it is:

* nested deeper than :data:`MAX_NESTING` levels (JSON arrays and objects, XML elements);
* holding more than :data:`MAX_CLIPS` clips (``.otio`` clips, EDL events, FCP XML clip items),
  :data:`MAX_MARKERS` markers, or :data:`MAX_OBJECTS` OTIO objects / XML elements in all, or an EDL
  of more than :data:`MAX_EDL_LINES` lines;
* an XML document that declares entities (``<!ENTITY``: external entities, "billion laughs"): Final
  Cut Pro never writes one.

The reader itself then runs in a child process (:mod:`cluster.edit.isolated`), so a document
that still crashes or stalls it costs the driver nothing but a refusal.
"""

from __future__ import annotations

import re
import xml.parsers.expat
from dataclasses import dataclass

import numpy as np

from pipeline.errors import SpecError

MAX_NESTING = 128
"""Deepest nesting of arrays and objects (JSON) or elements (XML) read: a cut with nested stacks and
rich metadata is some 30 levels deep."""
MAX_CLIPS = 20_000
"""Most clips (EDL events, FCP XML clip items) one cut may hold; a feature's conform is a few thousand."""
MAX_MARKERS = 20_000
"""Most markers one cut may hold."""
MAX_OBJECTS = 2_000_000
"""Most OTIO objects (every clip, range, time, reference...) or XML elements in one cut."""
MAX_EDL_LINES = 250_000
"""Most lines one EDL may hold: 20,000 events with their comments (clip and source file names, motion
and audio lines) are under 200,000; OpenTimelineIO's EDL reader is Python, so lines cost time."""

_STRING = re.compile(rb'"[^"\\]*+(?:\\.[^"\\]*+)*+"', re.DOTALL)
"""A JSON string (unrolled and possessive: linear even where a quote is never closed)."""
_SCHEMA = re.compile(rb'"OTIO_SCHEMA"\s*:\s*"([A-Za-z_][A-Za-z0-9_]*)\.\d+"')
_EDL_EVENT = re.compile(rb"^[ \t]*\d+[ \t]+\S", re.MULTILINE)
"""An EDL event line (a transition's second line counts too: a bound, not a count of clips)."""
_ENTITY = re.compile(rb"<!ENTITY", re.IGNORECASE)
_LINE_BREAK = re.compile(rb"\r\n|[\r\v\f\x1c\x1d\x1e]|\xc2\x85|\xe2\x80[\xa8\xa9]")
"""Every line break other than ``\n`` that ``str.splitlines()`` knows (CR, CR LF, VT, FF, the file,
group and record separators, NEL, LINE and PARAGRAPH SEPARATOR in UTF-8)."""


@dataclass(frozen=True)
class Counts:
    """What a scan found: the deepest nesting, and the clips, markers and objects counted."""

    depth: int
    clips: int
    markers: int
    objects: int


def check_document(raw: bytes, adapter: str, *, field: str, url: str) -> Counts:
    """Scan ``raw`` (the bytes of a timeline the adapter ``adapter`` reads) and refuse it past the
    bounds; SpecError naming ``field`` and ``url``.  Formats without a scanner here (AAF) are bounded
    by the child process alone."""
    if adapter == "otio_json":
        counts = json_counts(raw)
    elif adapter == "fcp_xml":
        counts = xml_counts(raw, field=field, url=url)
    elif adapter == "cmx_3600":
        raw = _LINE_BREAK.sub(b"\n", raw)  # the reader splits lines as str.splitlines() does
        lines = raw.count(b"\n") + 1
        if lines > MAX_EDL_LINES:
            raise SpecError(
                field, f"{url} holds {lines:,} lines, more than the {MAX_EDL_LINES:,} Recast reads in one EDL"
            )
        counts = Counts(depth=0, clips=len(_EDL_EVENT.findall(raw)), markers=0, objects=0)
    else:
        return Counts(0, 0, 0, 0)
    check_counts(counts, field=field, url=url)
    return counts


def check_counts(counts: Counts, *, field: str, url: str, partial: bool = False) -> None:
    """SpecError naming ``field`` and ``url`` when ``counts`` is past a bound (``partial``: counting
    stopped at the first bound passed, so the document holds at least that many)."""
    if counts.depth > MAX_NESTING:
        raise SpecError(field, f"{url} is nested deeper than {MAX_NESTING} levels; the timeline is refused")
    for what, found, bound in (
        ("clips (events)", counts.clips, MAX_CLIPS),
        ("markers", counts.markers, MAX_MARKERS),
        ("objects", counts.objects, MAX_OBJECTS),
    ):
        if found > bound:
            held = (
                f"more than the {bound:,} {what}" if partial else f"{found:,} {what}, more than the {bound:,}"
            )
            raise SpecError(
                field,
                f"{url} holds {held} Recast reads in one cut; split the cut (by reel or by act) and "
                "submit each part",
            )


def json_depth(raw: bytes) -> int:
    """The deepest nesting of arrays and objects in the JSON text ``raw`` (strings left out), found
    without recursion in time linear in its length."""
    bare = _STRING.sub(b'""', raw)
    codes = np.frombuffer(bare, dtype=np.uint8)
    opens = (codes == ord("[")) | (codes == ord("{"))
    closes = (codes == ord("]")) | (codes == ord("}"))
    steps = opens.astype(np.int8) - closes.astype(np.int8)
    marks = steps[steps != 0]
    if marks.size == 0:
        return 0
    return int(np.cumsum(marks, dtype=np.int64).max())


def json_counts(raw: bytes) -> Counts:
    """Depth, clips, markers and OTIO objects of an ``.otio`` document."""
    schemas: dict[bytes, int] = {}
    for name in _SCHEMA.findall(raw):
        schemas[name] = schemas.get(name, 0) + 1
    return Counts(
        depth=json_depth(raw),
        clips=schemas.get(b"Clip", 0),
        markers=schemas.get(b"Marker", 0),
        objects=sum(schemas.values()),
    )


def xml_counts(raw: bytes, *, field: str, url: str) -> Counts:
    """Depth, clip items, markers and elements of an XML document, read by expat with handlers only
    (no tree is built); stops at the first bound passed.  SpecError for entity declarations and for
    text that is not XML."""
    if _ENTITY.search(raw):
        raise SpecError(
            field, f"{url} declares XML entities (<!ENTITY>), which a timeline never needs; refused"
        )
    state = {"depth": 0, "deepest": 0, "clips": 0, "markers": 0, "elements": 0}

    def start(name: str, _attrs: object) -> None:
        state["depth"] += 1
        state["elements"] += 1
        state["deepest"] = max(state["deepest"], state["depth"])
        if name == "clipitem":
            state["clips"] += 1
        elif name == "marker":
            state["markers"] += 1
        if (
            state["depth"] > MAX_NESTING
            or state["clips"] > MAX_CLIPS
            or state["markers"] > MAX_MARKERS
            or state["elements"] > MAX_OBJECTS
        ):
            check_counts(_xml_state(state), field=field, url=url, partial=True)

    def end(_name: str) -> None:
        state["depth"] -= 1

    parser = xml.parsers.expat.ParserCreate()
    parser.SetParamEntityParsing(xml.parsers.expat.XML_PARAM_ENTITY_PARSING_NEVER)
    parser.StartElementHandler = start
    parser.EndElementHandler = end
    try:
        parser.Parse(raw, True)
    except xml.parsers.expat.ExpatError as exc:
        raise SpecError(field, f"{url} is not well-formed XML: {exc}") from None
    return _xml_state(state)


def _xml_state(state: dict[str, int]) -> Counts:
    return Counts(state["deepest"], state["clips"], state["markers"], state["elements"])
