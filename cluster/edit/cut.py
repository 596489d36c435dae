"""The clips of a cut: the chosen video tracks walked in order, each item placed by track and
record timecode; what cannot become a shot (speed effects, nested stacks) said so.

Gaps, transitions, generators (black, bars) and disabled clips are no shots and no problem.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import opentimelineio as otio

from pipeline.errors import SpecError


@dataclass(frozen=True)
class CutItem:
    """Where an item of the cut is: for messages, and to find it again in the written-back cut."""

    track: str
    """The track's name (``V1``, ``V2``... for an unnamed one)."""
    track_index: int
    """Its index in ``timeline.tracks`` (audio tracks counted)."""
    item_index: int
    """The item's index in its track (gaps and transitions counted)."""
    name: str
    record: str
    """Record timecode of its first frame (the timeline's global start time included)."""
    start: float = 0.0
    """Record time of its first frame in seconds (the cut's order)."""
    event: int | None = None
    """An EDL's event number."""

    def label(self) -> str:
        event = f"event {self.event}, " if self.event is not None else ""
        return f"{event}clip {self.name!r} at {self.record} on {self.track}"


@dataclass(frozen=True)
class Unusable:
    """A clip (or nested stack) that cannot be rendered, and why."""

    where: CutItem
    reason: str

    def describe(self) -> str:
        return f"{self.where.label()}: {self.reason}"


@dataclass(frozen=True)
class CutClip:
    """A clip to resolve into media."""

    where: CutItem
    clip: otio.schema.Clip = field(compare=False)


def video_tracks(
    timeline: otio.schema.Timeline, wanted: tuple[str, ...] | None, url: str
) -> list[tuple[int, str]]:
    """(index in ``timeline.tracks``, name) of the video tracks to render, in timeline order.

    An unnamed track is ``V<n>`` by its position among the video tracks; disabled tracks are left
    out unless named.  SpecError naming ``edit.tracks`` for a name the timeline does not have."""
    found: list[tuple[int, str, bool]] = []
    for index, track in enumerate(timeline.tracks):
        if track.kind == otio.schema.TrackKind.Video:
            found.append((index, track.name or f"V{len(found) + 1}", bool(track.enabled)))
    if wanted is None:
        return [(index, name) for index, name, enabled in found if enabled]
    names = [name for _, name, _ in found]
    for name in wanted:
        if name not in names:
            raise SpecError(
                "edit.tracks",
                f"{url} has no video track {name!r} (its video tracks: {', '.join(names) or 'none'})",
            )
    return [(index, name) for index, name, _ in found if name in wanted]


def walk(
    timeline: otio.schema.Timeline, tracks: list[tuple[int, str]], events: dict[int, int]
) -> tuple[list[CutClip], list[Unusable]]:
    """The clips of ``tracks`` in track then record order, and the items that cannot be rendered.

    ``events``: EDL event numbers by item index (of the first video track)."""
    clips: list[CutClip] = []
    unusable: list[Unusable] = []
    first_video = tracks[0][0] if tracks else -1
    for track_index, track_name in tracks:
        track = timeline.tracks[track_index]
        ranges = track.range_of_all_children()  # one pass (an item's range_in_parent sums its track)
        for item_index, item in enumerate(track):
            if isinstance(item, otio.schema.Gap | otio.schema.Transition):
                continue
            event = events.get(item_index) if track_index == first_video else None
            start = _record_start(timeline, ranges[item].start_time)
            where = CutItem(
                track=track_name,
                track_index=track_index,
                item_index=item_index,
                name=item.name or "",
                record=timecode_at(start),
                start=start.to_seconds(),
                event=event,
            )
            if isinstance(item, otio.core.Composition):
                unusable.append(Unusable(where, "a nested stack: flatten it in the editorial tool"))
            elif isinstance(item, otio.schema.Clip) and item.enabled:
                if isinstance(item.media_reference, otio.schema.GeneratorReference):
                    continue  # black, bars, a title generator: no media
                effect = _time_effect(item)
                if effect is not None:
                    unusable.append(Unusable(where, effect))
                else:
                    clips.append(CutClip(where, item))
    return clips, unusable


def _time_effect(clip: otio.schema.Clip) -> str | None:
    for effect in clip.effects:
        if isinstance(effect, otio.schema.FreezeFrame):
            return "a freeze frame (FreezeFrame effect): render the plate, then retime it in the comp"
        if isinstance(effect, otio.schema.LinearTimeWarp):
            return (
                f"a speed effect (LinearTimeWarp x{effect.time_scalar:g}): render the plate, then retime it"
            )
        if isinstance(effect, otio.schema.TimeEffect):
            return f"a time effect ({effect.effect_name or type(effect).__name__})"
    return None


def _record_start(
    timeline: otio.schema.Timeline, start: otio.opentime.RationalTime
) -> otio.opentime.RationalTime:
    """The record time of an item starting at ``start`` in its track (the timeline's global start time
    included)."""
    return timeline.global_start_time + start if timeline.global_start_time is not None else start


def timecode_at(time: otio.opentime.RationalTime) -> str:
    """``HH:MM:SS:FF`` at the time's own rate (seconds where no timecode counts at that rate)."""
    try:
        return str(otio.opentime.to_timecode(time, time.rate))
    except (ValueError, TypeError):
        return f"{time.to_seconds():.3f}s"
