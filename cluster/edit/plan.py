"""Shots from the cut: :func:`with_edit_shots` turns every clip of ``edit:`` into an ordinary shot.

Each clip with media becomes one :class:`~cluster.spec.shot.ShotSpec` (``url``, ``frames`` in the
media's own numbering, ``handles``, the clip's name) merged into the job's ``shots``, so the
probe, the plan, the resume keys and publishing see nothing new.  Names are the clips' own,
sanitised; a name used again gets ``_2``, ``_3``... in record order.  Two clips of the same
media and frames are one shot (analysed and rendered once, both relinked to its output); clips
whose frames of one media only overlap are separate shots (a note in the summary says so).

The media of an ``.otioz`` are resolved from its local extraction, then moved to the job's work
area (:mod:`cluster.edit.bundle`; the plan says what to publish there).

A ``shots:`` entry with only a ``name`` overrides the settings of the clip of that name (colour,
fps, selection, faces, output, handles); its place in ``shots`` is taken by the clip's shot, so
errors about its settings name that entry.
"""

from __future__ import annotations

import bisect
import dataclasses
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cluster.edit.bundle import Bundle, BundledMedia, read_bundle
from cluster.edit.cut import CutItem, Unusable, video_tracks, walk
from cluster.edit.media import ClipMedia, MediaResolver
from cluster.edit.read import read_timeline
from cluster.spec.edit import EditSpec
from cluster.spec.job import JobSpec
from cluster.spec.shot import FrameRange, ShotSpec
from cluster.spec.shot_refs import expand_shots, work_url_for
from pipeline.errors import SpecError
from pipeline.plates.sequence import is_sequence_url, list_frames, parse_sequence_url
from pipeline.store import storage

SHOWN = 20
"""Clips a refusal names one by one (the rest are counted)."""


@dataclass(frozen=True)
class ClipShot:
    """One clip of the cut and the shot that renders it."""

    where: CutItem
    shot: str
    media: ClipMedia
    handles: int
    shared: bool = False
    """Another clip (earlier in record order) has the same media and frames: its shot renders both."""

    @property
    def handles_available(self) -> tuple[int, int]:
        """Handle frames the media holds before and after the clip, up to ``handles``."""
        first, last = self.media.available
        return min(self.handles, self.media.first - first), min(self.handles, last - self.media.last)

    @property
    def clamped(self) -> bool:
        return self.handles_available != (self.handles, self.handles)

    def delivered(self, *, include_handles: bool) -> tuple[int, int]:
        """First and last media frame of its output (a movie's; a sequence holds every plate frame)."""
        before, after = self.handles_available if include_handles else (0, 0)
        return self.media.first - before, self.media.last + after


@dataclass(frozen=True)
class EditPlan:
    """What the cut gave the job: its clips and shots, what was left out, where it is written back."""

    edit: EditSpec
    timeline_json: str
    """The timeline as read (``otio_json``), for the write-back."""
    clips: tuple[ClipShot, ...]
    """Every rendered clip, in record order."""
    skipped: tuple[Unusable, ...]
    """Clips left out (``offline: skip``), in track and record order."""
    notes: tuple[str, ...] = ()
    timeline_url: str | None = None
    bundled: BundledMedia | None = None
    """The ``.otioz`` media the clips use, to publish to the work area before they are read
    (:func:`cluster.edit.bundle.publish_bundled`)."""

    def summary(self) -> dict[str, Any]:
        """The summary's ``edit`` section."""
        return {
            "url": self.edit.url,
            "clips": len(self.clips),
            "shots": len({c.shot for c in self.clips}),
            "skipped": [_where(u.where) | {"reason": u.reason} for u in self.skipped],
            "handles_clamped": [
                _where(c.where) | {"shot": c.shot, "asked": c.handles, "available": list(c.handles_available)}
                for c in self.clips
                if c.clamped and not c.shared
            ],
            "notes": list(self.notes),
            "timeline_url": self.timeline_url,
            "timeline_written": False,
        }

    def warnings(self) -> list[str]:
        """What the job summary and report list about the cut."""
        out = [f"edit: {u.describe()}; skipped (edit.offline: skip)" for u in self.skipped]
        for c in self.clips:
            if c.clamped and not c.shared:
                before, after = c.handles_available
                out.append(
                    f"edit: {c.where.label()} (shot {c.shot}): handles clamped to the media, {c.handles} "
                    f"asked, {before} before and {after} after in {c.media.url}"
                )
        return out + [f"edit: {note}" for note in self.notes]


def _where(where: CutItem) -> dict[str, Any]:
    return {"clip": where.name, "track": where.track, "record": where.record, "event": where.event}


def with_edit_shots(
    spec: JobSpec, *, allowed: Callable[[str], None] | None = None
) -> tuple[JobSpec, EditPlan | None]:
    """``spec`` with every clip of its ``edit`` as a shot, and the plan of the cut (None without ``edit``).

    Call it once, on the spec as loaded.  ``allowed(url)`` (the studio policy) sees the timeline
    and every media URL before it is read, listed or probed.  Raises SpecError naming the file,
    the clip (name and record timecode) or the field; with ``edit.offline: fail`` one error names
    every clip that cannot be rendered.
    """
    edit = spec.edit
    if edit is None:
        return spec, None
    if allowed is not None:
        allowed(edit.url)
    bundle: Bundle | None = None
    if edit.adapter_name() == "otioz":
        timeline, bundle = read_bundle(edit)
        events: dict[int, int] = {}
    else:
        timeline, events = read_timeline(edit)
    cut_clips, unusable = walk(timeline, video_tracks(timeline, edit.tracks, edit.url), events)
    resolver = MediaResolver(edit, allowed=allowed, limits=spec.limits, bundle=bundle)
    placed: list[tuple[CutItem, ClipMedia]] = []
    for cut in cut_clips:
        found = resolver.resolve(cut)
        if isinstance(found, Unusable):
            unusable.append(found)
        else:
            placed.append((cut.where, found))
    unusable.sort(key=lambda u: (u.where.track_index, u.where.item_index))
    if unusable and edit.offline == "fail":
        listed = "; ".join(u.describe() for u in unusable[:SHOWN])
        more = f"; and {len(unusable) - SHOWN} more" if len(unusable) > SHOWN else ""
        raise SpecError(
            "edit.offline",
            f"{len(unusable)} clip(s) of {edit.url} cannot be rendered: {listed}{more} "
            "(set edit.offline: skip to render the rest)",
        )
    placed.sort(key=lambda p: _order(p[0]))
    skipped = {clip_name(u.where.name) for u in unusable}
    bundled = None
    if bundle is not None:
        placed, bundled = _moved_to_work_area(spec, placed, skipped, bundle, allowed=allowed)
    clips = _named(spec, edit, placed, skipped)
    shots = _merged(spec, clips)
    if not shots:
        raise SpecError("edit", f"no clip of {edit.url} can be rendered, and the job has no other shot")
    plan = EditPlan(
        edit=edit,
        timeline_json=str(timeline.to_json_string()),
        clips=tuple(clips),
        skipped=tuple(unusable),
        notes=tuple(_overlaps(clips)),
        timeline_url=spec.output.timeline_url,
        bundled=bundled,
    )
    return spec.model_copy(update={"shots": tuple(shots)}), plan


def _moved_to_work_area(
    spec: JobSpec,
    placed: list[tuple[CutItem, ClipMedia]],
    skipped: set[str],
    bundle: Bundle,
    *,
    allowed: Callable[[str], None] | None,
) -> tuple[list[tuple[CutItem, ClipMedia]], BundledMedia | None]:
    """The clips of bundled media moved from the bundle's local extraction to
    ``<work_url>/edit-media/<sha256[:12]>/`` (each new URL shown to the policy), and what to publish there.

    The work area may be decided by the first shot's output (``.recast-work/<job_id>`` beside it),
    so the shots are made once with the local URLs to find it: their names and extensions are the same."""
    used = sorted({m.url for _, m in placed if bundle.extracted(m.url) is not None})
    if not used:
        bundle.close()
        return placed, None
    assert spec.edit is not None
    if spec.output.work_url is None:
        local = spec.model_copy(
            update={"shots": tuple(_merged(spec, _named(spec, spec.edit, placed, skipped)))}
        )
        work_url = work_url_for(local, expand_shots(local))
    else:
        work_url = work_url_for(spec, [])
    root = bundle.root_in(work_url)
    moved: dict[str, str] = {}
    files: dict[str, str] = {}
    for url in used:
        path = bundle.extracted(url)
        assert path is not None
        moved[url] = storage.join(root, path)
        if allowed is not None:
            allowed(moved[url])
        frames = [f.url for f in list_frames(parse_sequence_url(url))] if is_sequence_url(url) else [url]
        for frame in frames:
            inside = bundle.extracted(frame)
            assert inside is not None, frame
            files[inside] = storage.join(root, inside)
    out = [(where, dataclasses.replace(m, url=moved.get(m.url, m.url))) for where, m in placed]
    return out, BundledMedia(bundle, root, tuple(sorted(files.items())))


def _order(where: CutItem) -> tuple[float, int, int]:
    return where.start, where.track_index, where.item_index


def clip_name(name: str) -> str:
    """A clip's name as a shot name (:data:`cluster.spec.shot.NAME_RE`): other characters become ``_``."""
    cleaned = re.sub(r"[^A-Za-z0-9._-]", "_", name.strip()).lstrip("._-")
    return cleaned or "clip"


def _named(
    spec: JobSpec, edit: EditSpec, placed: list[tuple[CutItem, ClipMedia]], skipped: set[str]
) -> list[ClipShot]:
    """The clips with their shot names and handles, the ``shots:`` overrides checked."""
    overrides: dict[str, int] = {}
    for i, shot in enumerate(spec.shots):
        if shot.is_override:
            assert shot.name is not None
            if shot.name in overrides:
                raise SpecError(
                    f"shots[{i}].name", f"overrides clip {shot.name} again (shots[{overrides[shot.name]}])"
                )
            overrides[shot.name] = i
    names: dict[tuple[str, int, int], str] = {}
    taken: set[str] = set()
    suffix: dict[str, int] = {}  # the next number to try for a base name: linear however many share it
    clips: list[tuple[CutItem, ClipMedia, str, bool]] = []
    for where, media in placed:
        key = (media.url, media.first, media.last)
        if key in names:
            clips.append((where, media, names[key], True))
            continue
        base = clip_name(where.name or media.url.rsplit("/", 1)[-1].split(".", 1)[0])
        name, n = base, suffix.get(base, 2)
        while name in taken:
            name, n = f"{base}_{n}", n + 1
        if name != base:
            suffix[base] = n
        taken.add(name)
        names[key] = name
        clips.append((where, media, name, False))
    for i, shot in enumerate(spec.shots):
        if shot.is_override:
            if shot.name not in taken and shot.name not in skipped:
                known = ", ".join(sorted(taken)[:SHOWN]) or "none"
                raise SpecError(
                    f"shots[{i}].name", f"{shot.name!r} is no clip of {edit.url} (its clips: {known})"
                )
            if shot.frames is not None:
                raise SpecError(f"shots[{i}].frames", "an edit clip's frames are its source range in the cut")
        elif shot.name in taken:
            raise SpecError(
                f"shots[{i}].name",
                f"{shot.name!r} is also a clip of {edit.url}: to override the clip's settings give no "
                "'url' or 'pattern'; else rename the shot",
            )
    out = []
    for where, media, name, shared in clips:
        index = overrides.get(name)
        own = spec.shots[index] if index is not None else None
        handles = own.handles if own is not None and "handles" in own.model_fields_set else edit.handles
        out.append(ClipShot(where, name, media, handles, shared))
    return out


def _merged(spec: JobSpec, clips: list[ClipShot]) -> list[ShotSpec]:
    """The job's shots: each override replaced by its clip's shot, the other clips' shots after."""
    made: dict[str, ShotSpec] = {}
    for clip in clips:
        if not clip.shared:
            made[clip.shot] = ShotSpec(
                name=clip.shot,
                url=clip.media.url,
                frames=FrameRange(first=clip.media.first, last=clip.media.last),
                handles=clip.handles,
            )
    out = []
    for shot in spec.shots:
        if not shot.is_override:
            out.append(shot)
        elif shot.name in made:  # (an override of a skipped clip has nothing to override)
            own = {k: getattr(shot, k) for k in shot.model_fields_set - {"name", "handles"}}
            out.append(made.pop(shot.name).model_copy(update=own))
    return out + list(made.values())


def _overlaps(clips: list[ClipShot]) -> list[str]:
    """Clips that render overlapping frames of one media as separate shots: the first :data:`SHOWN`
    pairs named, the rest counted (a sweep per media, so a cut of 20,000 clips costs no more than
    sorting them)."""
    alone = [c for c in clips if not c.shared]
    by_media: dict[str, list[int]] = {}
    for index, clip in enumerate(alone):
        by_media.setdefault(clip.media.url, []).append(index)
    pairs: list[tuple[int, int]] = []
    count = 0
    for indexes in by_media.values():
        indexes.sort(key=lambda i: (alone[i].media.first, i))
        lasts: list[tuple[int, int]] = []  # (last frame, index) of the clips swept so far, sorted
        for b in indexes:
            first = alone[b].media.first
            start = bisect.bisect_left(lasts, (first, -1))
            count += len(lasts) - start
            for _, a in lasts[start:][: max(0, SHOWN - len(pairs))]:
                pairs.append((min(a, b), max(a, b)))
            bisect.insort(lasts, (alone[b].media.last, b))
    notes = []
    for a, b in sorted(pairs):
        one, other = alone[a], alone[b]
        notes.append(
            f"clips {one.shot} ({one.media.first}-{one.media.last}) and {other.shot} ({other.media.first}-"
            f"{other.media.last}) use overlapping frames of {one.media.url}: rendered as separate shots"
        )
    if count > len(pairs):
        notes.append(
            f"and {count - len(pairs):,} more pairs of clips that use overlapping frames of one media"
        )
    return notes
