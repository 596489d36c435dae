"""Real media and real OpenTimelineIO cuts for the edit tests: plates written with OpenImageIO
(``tests.plates``), movies with PyAV (``tests.clips``), timelines built with OTIO.

Plates live in reel folders (``reels/<reel>/<reel>.####.<ext>``) with SMPTE timecode in their
headers, and the cuts express source ranges in that timecode, as editorial tools do.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import opentimelineio as otio

from tests.clips import ClipSpec, write_clip
from tests.plates import write_sequence

RT = otio.opentime.RationalTime
TR = otio.opentime.TimeRange
RATE = 24


@dataclass(frozen=True)
class Plate:
    """A plate on disk: reel name, Recast URL, frame numbers, the timecode of its first frame."""

    reel: str
    url: str
    first: int
    count: int
    timecode: str
    ext: str

    @property
    def last(self) -> int:
        return self.first + self.count - 1

    def reference(self) -> otio.schema.ImageSequenceReference:
        """Its ``ImageSequenceReference``: media time is the plate's timecode."""
        folder, name = self.url.rsplit("/", 1)
        return otio.schema.ImageSequenceReference(
            target_url_base=folder + "/",
            name_prefix=name.split("####")[0],
            name_suffix=name.split("####")[1],
            start_frame=self.first,
            frame_step=1,
            rate=RATE,
            frame_zero_padding=4,
            available_range=TR(otio.opentime.from_timecode(self.timecode, RATE), RT(self.count, RATE)),
        )

    def source(self, first: int, last: int) -> otio.opentime.TimeRange:
        """Source range of frames ``first``-``last`` (timecode-based)."""
        start = otio.opentime.from_timecode(self.timecode, RATE) + RT(first - self.first, RATE)
        return TR(start, RT(last - first + 1, RATE))


def write_plate(
    root: str | os.PathLike[str],
    reel: str,
    *,
    fmt: str = "exr",
    count: int = 24,
    timecode: str = "01:00:00:00",
    size: tuple[int, int] = (64, 36),
) -> Plate:
    """An EXR (half, ACEScg) or DPX (10-bit log, no colour space in the header) plate."""
    folder = Path(root) / "reels" / reel
    if fmt == "dpx":
        url = write_sequence(
            folder, reel, fmt="dpx", pixel="uint10", compression=None, colour_space="ACEScct",
            count=count, size=size, timecode=timecode,
        )  # fmt: skip
    else:
        url = write_sequence(folder, reel, count=count, size=size, timecode=timecode)
    return Plate(reel, url, 1001, count, timecode, fmt)


def write_movie(path: str | os.PathLike[str], *, frames: int = 90, rate: int = 30, size=(64, 36)) -> str:
    """A movie at ``rate`` fps, timecode 01:00:00:00, no audio."""
    spec = ClipSpec(width=size[0], height=size[1], frames=frames, rate=Fraction(rate), audio=False, gop=rate)
    return write_clip(str(path), spec)


def clip(
    name: str, ref: otio.core.MediaReference | None, source: otio.opentime.TimeRange
) -> otio.schema.Clip:
    return otio.schema.Clip(
        name=name, media_reference=ref or otio.schema.MissingReference(), source_range=source
    )


def gap(frames: int) -> otio.schema.Gap:
    return otio.schema.Gap(source_range=TR(RT(0, RATE), RT(frames, RATE)))


def dissolve(frames: int = 2) -> otio.schema.Transition:
    return otio.schema.Transition(
        name="dissolve",
        transition_type=otio.schema.TransitionTypes.SMPTE_Dissolve,
        in_offset=RT(frames, RATE),
        out_offset=RT(frames, RATE),
    )


def timeline(name: str, *tracks: otio.schema.Track) -> otio.schema.Timeline:
    """A 24 fps timeline starting at 01:00:00:00 with ``tracks`` and a little metadata."""
    out = otio.schema.Timeline(name=name, global_start_time=RT(86400, RATE))
    out.metadata["studio"] = {"show": "ep101", "cut": "v3"}
    for track in tracks:
        out.tracks.append(track)
    return out


def track(name: str, *items: otio.core.Composable) -> otio.schema.Track:
    out = otio.schema.Track(name=name, kind=otio.schema.TrackKind.Video)
    for item in items:
        out.append(item)
    return out


def write_otio(cut: otio.schema.Timeline, path: str | os.PathLike[str]) -> str:
    otio.adapters.write_to_file(cut, str(path))
    return str(path)


def as_reels(cut: otio.schema.Timeline, reels: dict[str, str]) -> otio.schema.Timeline:
    """A copy of ``cut`` whose sequence clips name only their reel (as a conform EDL does):
    ``MissingReference`` and ``cmx_3600.reel``; ``reels``: plate URL -> reel name."""
    out = cut.deepcopy()
    for item in out.find_clips():
        ref = item.media_reference
        if isinstance(ref, otio.schema.ImageSequenceReference):
            url = ref.target_url_base + ref.name_prefix + "####" + ref.name_suffix
            item.media_reference = otio.schema.MissingReference()
            item.metadata["cmx_3600"] = {"reel": reels[url]}
    return out


@dataclass(frozen=True)
class Media:
    root: str
    exr: Plate
    """A001C003: 24 EXR frames 1001-1024 at 01:00:00:00."""
    exr2: Plate
    """B002C004: 12 EXR frames 1001-1012 at 02:00:00:00."""
    dpx: Plate
    """C003C001: 12 DPX 10-bit log frames 1001-1012 at 03:00:00:00 (no colour space in the header)."""
    movie: str
    """M30.mp4: 90 frames at 30 fps, timecode 01:00:00:00."""
    source: str
    """An identity picture."""


MOVIE_AT_1H = otio.opentime.from_timecode("01:00:00:00", 30)


def the_cut(media: Media) -> otio.schema.Timeline:
    """V1: two uses of one EXR plate, a gap, a dissolve, a DPX log plate, a 30 fps movie, then
    what cannot be rendered: offline, missing file, speed effect, nested stack.  V2: the first
    clip's frames again."""
    a, d = media.exr, media.dpx
    first = clip("sc010", a.reference(), a.source(1005, 1012))
    first.markers.append(
        otio.schema.Marker(name="fix eyes", marked_range=TR(a.source(1007, 1007).start_time))
    )
    first.metadata["vfx"] = {"id": "SC010_0010", "notes": "hero left"}
    movie = otio.schema.ExternalReference(target_url=media.movie, available_range=TR(MOVIE_AT_1H, RT(90, 30)))
    lost = otio.schema.ExternalReference(target_url=os.path.join(media.root, "lost.mov"))
    fast = clip("fast", a.reference(), a.source(1001, 1004))
    fast.effects.append(otio.schema.LinearTimeWarp(time_scalar=2.0))
    nest = otio.schema.Stack(name="nest")
    nest.append(track("inner", clip("inner", a.reference(), a.source(1001, 1004))))
    return timeline(
        "ep101_v3",
        track(
            "V1",
            first,
            gap(5),
            clip("sc010", a.reference(), a.source(1015, 1020)),
            dissolve(),
            clip("grade dpx", d.reference(), d.source(1003, 1008)),
            # 1 s into the movie, 1 s long, on a 24 fps timeline: the movie's frames 30-59.
            clip("mov30", movie, TR(MOVIE_AT_1H.rescaled_to(RATE) + RT(24, RATE), RT(24, RATE))),
            clip("offline_a", None, TR(RT(0, RATE), RT(10, RATE))),
            clip("lost", lost, TR(RT(0, RATE), RT(10, RATE))),
            fast,
            nest,
        ),
        track("V2", gap(2), clip("sc010", a.reference(), a.source(1005, 1012))),
    )


def job(
    media: Media, url: str, tmp: str, *, edit: dict[str, Any] | None = None, **extra: Any
) -> dict[str, Any]:
    data: dict[str, Any] = {
        "job_id": "cut",
        "edit": {"url": url, "handles": 8, **(edit or {})},
        "shots": [
            {"name": "grade_dpx", "colour": {"plate": "ACEScct"}, "handles": 2},
            {"name": "mov30", "output": os.path.join(tmp, "out", "mov30.mp4")},
        ],
        "identities": {"hero": {"images": [media.source]}},
        "output": {"url": os.path.join(tmp, "out", "{shot}", "{shot}.####.{ext}")},
    }
    data.update(extra)
    return data
