"""Back to the cut: the timeline as read, every rendered clip pointing at its delivered output.

Only media references change: tracks, clips, source ranges, gaps, transitions, markers,
effects and metadata are the timeline's own (read back from the JSON the plan kept).  A sequence
output is an ``ImageSequenceReference`` over the plate's frames (numbers, padding and rate
kept); a movie output an ``ExternalReference`` whose available range is the frames it holds, in
the source's time, so each clip's source range still selects the same frames.  Clips left out
(offline, skipped, or whose shot is not published) keep their media.
"""

from __future__ import annotations

from collections.abc import Mapping

import opentimelineio as otio
from opentimelineio.opentime import RationalTime

from cluster.edit.plan import ClipShot, EditPlan
from cluster.edit.read import timeline_bytes
from pipeline.plates.sequence import parse_sequence_url
from pipeline.store import storage


def relinked(plan: EditPlan, outputs: Mapping[str, str], *, include_handles: bool) -> otio.schema.Timeline:
    """The cut with the clip of every shot in ``outputs`` (shot name -> output URL) relinked."""
    timeline = otio.schema.Timeline.from_json_string(plan.timeline_json)
    for clip in plan.clips:
        url = outputs.get(clip.shot)
        if url is None:
            continue
        item = timeline.tracks[clip.where.track_index][clip.where.item_index]
        assert isinstance(item, otio.schema.Clip), item
        item.media_reference = output_reference(
            clip, url, include_handles=include_handles, was=item.media_reference
        )
    return timeline


def output_reference(
    clip: ClipShot, url: str, *, include_handles: bool, was: otio.core.MediaReference | None = None
) -> otio.core.MediaReference:
    """The reference to ``clip``'s output ``url``, in the time of its source media."""
    media = clip.media
    metadata = {"recast": {"shot": clip.shot, "source": media.url}}
    if media.sequence:
        first, last = media.available  # every frame of the plate: those not rendered are copied
        pattern = parse_sequence_url(url)
        ref: otio.core.MediaReference = otio.schema.ImageSequenceReference(
            target_url_base=pattern.directory.rstrip("/") + "/",
            name_prefix=pattern.head,
            name_suffix=pattern.tail,
            start_frame=first,
            frame_step=1,
            rate=media.rate,
            frame_zero_padding=pattern.padding,
            available_range=_range(clip, first, last),
            metadata=metadata,
        )
    else:
        first, last = clip.delivered(include_handles=include_handles)
        ref = otio.schema.ExternalReference(
            target_url=url, available_range=_range(clip, first, last), metadata=metadata
        )
    ref.name = was.name if was is not None else ""
    return ref


def _range(clip: ClipShot, first: int, last: int) -> otio.opentime.TimeRange:
    media = clip.media
    return otio.opentime.TimeRange(media.time_of(first), RationalTime(last - first + 1, media.rate))


def check_timeline_output(plan: EditPlan, outputs: Mapping[str, str], *, include_handles: bool) -> None:
    """Write the relinked cut to memory only, before Ray: an adapter that cannot write it (an EDL
    of several video tracks...) is a SpecError naming ``output.timeline_url`` now."""
    if plan.timeline_url is not None:
        timeline_bytes(relinked(plan, outputs, include_handles=include_handles), plan.timeline_url)


def write_timeline(
    plan: EditPlan, outputs: Mapping[str, str], *, include_handles: bool, overwrite: bool
) -> None:
    """Write the relinked cut to ``output.timeline_url`` atomically (``overwrite`` False: only if absent)."""
    assert plan.timeline_url is not None
    data = timeline_bytes(relinked(plan, outputs, include_handles=include_handles), plan.timeline_url)
    storage.write_bytes(plan.timeline_url, data, overwrite=overwrite)
