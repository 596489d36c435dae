"""Reading and writing a timeline file with OpenTimelineIO, within bounds.

The bytes are read through :mod:`pipeline.store.storage` (local, ``s3://``, ``gs://``; at most
:data:`TIMELINE_MAX_BYTES`) into a private temporary file that the adapter reads, so every
format and store goes one way (an ``.otioz``, with its media, is read by :mod:`cluster.edit.bundle`).
The bytes are scanned first (:mod:`cluster.edit.bounds`: nesting, clips, markers), then the adapter
reads them in a child process (:mod:`cluster.edit.isolated`), so no document can crash or stall the
driver.  No media linker runs.  Any problem is a SpecError naming ``edit.url`` (or
``output.timeline_url``) and the file.
"""

from __future__ import annotations

import os
import re
import tempfile

import opentimelineio as otio

from cluster.edit.bounds import check_document
from cluster.edit.isolated import read_isolated
from cluster.spec.edit import EditSpec
from cluster.spec.output import TIMELINE_WRITERS, extension_of
from pipeline.errors import InputRefused, SpecError, StorageError
from pipeline.store import storage

TIMELINE_MAX_BYTES = 64 * 1024 * 1024
"""Largest timeline file read (an ``.otioz``'s ``content.otio``; the bundle itself, media and all, is
bounded by :data:`cluster.edit.bundle.BUNDLE_MAX_BYTES`)."""
EXTRAS = {"AAF": ("aaf", "otio-aaf-adapter")}
"""Adapters Recast reads through an optional extra: adapter -> (extra, package)."""
WRITER_LIMITS = {
    "cmx_3600": "an EDL holds one video track and no nested stack",
    "fcp_xml": "its FCP 7 XML writer takes movie clips only (no image sequence, no offline clip)",
}
"""What each writer cannot write, said with its refusal (write ``.otio`` instead)."""
_EVENT_LINE = re.compile(r"^\s*(\d+)\s+\S+\s+(\S+)\s+")
"""An EDL event line: its number and channels (only to name events; OTIO reads the EDL)."""


def read_timeline(edit: EditSpec) -> tuple[otio.schema.Timeline, dict[int, int]]:
    """The timeline ``edit.url`` names, and for an EDL the event number of each video clip
    (its index in the first video track -> number)."""
    name = edit.adapter_name()
    if name not in otio.adapters.available_adapter_names():
        extra = EXTRAS.get(name)
        how = f"install Recast's '{extra[0]}' extra ({extra[1]})" if extra else "install its plugin"
        raise SpecError("edit.url", f"{edit.url}: reading it needs the OpenTimelineIO adapter {name}: {how}")
    try:
        raw = storage.read_bytes(edit.url, max_bytes=TIMELINE_MAX_BYTES)
    except InputRefused as exc:
        raise SpecError("edit.url", f"{edit.url}: not a usable timeline: {exc.reason}") from None
    except StorageError as exc:
        raise SpecError("edit.url", f"cannot read the timeline: {exc}") from None
    check_document(raw, name, field="edit.url", url=edit.url)
    options: dict[str, object] = {"rate": edit.edl_rate()} if name == "cmx_3600" else {}
    with tempfile.TemporaryDirectory(prefix="recast-edit-") as folder:
        path = os.path.join(folder, "timeline" + extension_of(edit.url))
        with open(path, "wb") as fh:
            fh.write(raw)
        result = adapter_read(path, name, edit.url, options)
    timeline = one_timeline(result, edit.url)
    events = _edl_events(raw, timeline) if name == "cmx_3600" else {}
    return timeline, events


def adapter_read(path: str, name: str, url: str, options: dict[str, object] | None = None) -> object:
    """What the adapter ``name`` reads from the local ``path`` (no media linker), read in a child
    process; SpecError naming ``edit.url`` and ``url`` when it cannot."""
    return read_isolated(path, name, field="edit.url", url=url, options=options)


def one_timeline(result: object, url: str) -> otio.schema.Timeline:
    """The one timeline ``result`` (a timeline, or a collection holding one) is."""
    if isinstance(result, otio.schema.SerializableCollection):
        timelines = [t for t in result.find_children(descended_from_type=otio.schema.Timeline)]
        if len(timelines) != 1:
            raise SpecError("edit.url", f"{url} holds {len(timelines)} timelines; Recast renders one")
        result = timelines[0]
    if not isinstance(result, otio.schema.Timeline):
        raise SpecError("edit.url", f"{url} holds a {type(result).__name__}, not a timeline")
    return result


def _edl_events(raw: bytes, timeline: otio.schema.Timeline) -> dict[int, int]:
    """Event numbers of the video events, in order, matched to the clips of the first video track.

    OTIO's reader makes one clip per event in file order but keeps no number: the numbers
    are taken from the event lines (a repeated number is the same event's transition line).
    Empty when the counts differ (then clips are named by record timecode only)."""
    numbers: list[int] = []
    for line in raw.decode("utf-8", "replace").splitlines():
        match = _EVENT_LINE.match(line)
        if match is None or (numbers and int(match.group(1)) == numbers[-1]):
            continue
        channels = match.group(2).upper()
        if "V" in channels or channels == "B":
            numbers.append(int(match.group(1)))
    video = [t for t in timeline.tracks if t.kind == otio.schema.TrackKind.Video]
    if not video:
        return {}
    clips = [i for i, item in enumerate(video[0]) if isinstance(item, otio.schema.Clip)]
    return dict(zip(clips, numbers, strict=True)) if len(clips) == len(numbers) else {}


def timeline_bytes(timeline: otio.schema.Timeline, url: str) -> bytes:
    """``timeline`` written in the format of ``url``'s extension; SpecError naming
    ``output.timeline_url`` when the adapter cannot write it (an EDL of several video tracks...)."""
    name = TIMELINE_WRITERS[extension_of(url)]
    try:
        return str(otio.adapters.write_to_string(timeline, adapter_name=name)).encode("utf-8")
    except Exception as exc:
        raise SpecError(
            "output.timeline_url",
            f"{url}: the {name} adapter cannot write this cut ({WRITER_LIMITS.get(name, 'see its error')}; "
            f"write .otio instead): {type(exc).__name__}: {exc}",
        ) from exc
