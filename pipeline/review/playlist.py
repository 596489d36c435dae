"""The job's dailies as one OpenTimelineIO playlist: a clip per shot, in shot order, each an
external reference to the shot's review movie with its available range (RV/OpenRV open it whole)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

import opentimelineio as otio


@dataclass(frozen=True)
class ReviewClip:
    """One shot's review movie: where it is, its frames and frame rate, its first timecode frame."""

    shot: str
    url: str
    frames: int
    rate: Fraction
    start: int = 0


def playlist(name: str, clips: Sequence[ReviewClip]) -> otio.schema.Timeline:
    """The playlist ``name``: one video track, one clip per review movie, in the order given."""
    timeline = otio.schema.Timeline(name=name)
    track = otio.schema.Track(name="review", kind=otio.schema.TrackKind.Video)
    for clip in clips:
        rate = float(clip.rate) if clip.rate > 0 else 24.0
        available = otio.opentime.TimeRange(
            otio.opentime.RationalTime(clip.start, rate), otio.opentime.RationalTime(clip.frames, rate)
        )
        reference = otio.schema.ExternalReference(target_url=clip.url, available_range=available)
        track.append(otio.schema.Clip(name=clip.shot, media_reference=reference, source_range=available))
    timeline.tracks.append(track)
    return timeline


def playlist_bytes(name: str, clips: Sequence[ReviewClip]) -> bytes:
    """:func:`playlist` as OTIO JSON."""
    return str(otio.adapters.write_to_string(playlist(name, clips), "otio_json")).encode()
