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
