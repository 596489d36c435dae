"""Notes acted on: a shot's ``fixes:``, each changing what is rendered on a range of its frames.

Frame numbers are the plate's own (a sequence's numbers, a video's positions from 0); track numbers
are the ones the QC report, ``summary.json`` and the ``tracks`` pass show::

    shots:
      - url: s3://plates/sc010_plate.####.exr
        fixes:
          - {frames: 1013-1028, track: 2, action: keep_plate}    # the plate's face stays
          - {frames: 1040-1060, track: 1, identity: double}      # another (declared) identity
          - frames: 1070-1080                                    # a face the detector missed
            box: {1070: [410, 120, 530, 270], 1080: [450, 118, 570, 268]}
          - {frames: 1081-1092, faces: {enhance: true, mask_blur: 0.12}}

A resubmitted job renders again only the chunks whose frames a changed fix touches
(:func:`fixes_of_chunk` is what enters a chunk's render key).

Bounds: frame numbers (a fix's and its box keys') lie within +-:data:`MAX_FRAME_NUMBER` when the spec
is read and within the shot once it is probed (:func:`check_fix_frames`); box coordinates are finite
pixels from 0 to :data:`MAX_BOX_COORD`, then within the plate; a box has at most :data:`MAX_BOX_KEYS`
keys; a track number is below :data:`~pipeline.tracking.fixes.FIX_TRACK_BASE`.  A shot takes at most
:data:`MAX_FIXES_PER_SHOT` fixes and a job :data:`MAX_FIXES_PER_JOB`.  Two fixes that say different
things of one track on the same frames (``keep_plate`` and an ``identity``, or two identities) are
refused, naming both (:func:`contradicting_fixes`); two boxes, or ``faces`` settings on frames
another fix changes, combine.
"""

from __future__ import annotations

import hashlib
import json
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Discriminator, Field, Tag, field_validator, model_validator

from cluster.spec.frames import FrameRange
from pipeline.configbase import Frozen
from pipeline.errors import SpecError
from pipeline.faces.config import FaceConfig
from pipeline.tracking.fixes import (
    FIX_TRACK_BASE,
    RENDER_FACE_FIELDS,
    AddBox,
    FaceSettings,
    FixOp,
    FixSpan,
    KeepPlate,
    SwitchIdentity,
)
from pipeline.video.probe import VideoInfo

MAX_FRAME_NUMBER = 10**9
"""Frame numbers of fixes and box keys lie strictly between minus and plus this (before the probe)."""
MAX_BOX_COORD = 65_536.0
"""Box coordinates are pixels from 0 to this (``limits.max_width`` and ``max_height`` at most), before
the probe puts them within the plate."""
MAX_BOX_KEYS = 1_000
"""Most keys of one box (a key on every frame of 40 s at 24 fps)."""
MAX_FIXES_PER_SHOT = 1_000
"""Most fixes of one shot (its ``fixes:`` and the ``--fixes`` files' for it)."""
MAX_FIXES_PER_JOB = 10_000
"""Most fixes of a whole job."""


def _bounded_frames(frames: FrameRange) -> FrameRange:
    if not (-MAX_FRAME_NUMBER < frames.first and frames.last < MAX_FRAME_NUMBER):
        raise ValueError(f"frame numbers must lie between -{MAX_FRAME_NUMBER:,} and {MAX_FRAME_NUMBER:,}")
    return frames


FixFrames = Annotated[FrameRange, AfterValidator(_bounded_frames)]
"""A fix's frames: a frame range whose numbers are within +-:data:`MAX_FRAME_NUMBER`."""
BoxKey = Annotated[int, Field(gt=-MAX_FRAME_NUMBER, lt=MAX_FRAME_NUMBER)]
BoxCoord = Annotated[float, Field(ge=0.0, le=MAX_BOX_COORD, allow_inf_nan=False)]
Box = tuple[BoxCoord, BoxCoord, BoxCoord, BoxCoord]


class KeepPlateFix(Frozen):
    """``track: N, action: keep_plate``: that track keeps the plate's face on these frames (no swap)."""

    frames: FixFrames
    """The frames fixed (the plate's own numbers, inclusive: ``1013-1028``), within the shot's rendered
    frames."""
    track: int = Field(ge=0, lt=FIX_TRACK_BASE)
    """The track, as the QC report, ``summary.json`` and the ``tracks`` pass number it."""
    action: Literal["keep_plate"]
    """``keep_plate``: no face is rendered on this track on these frames."""


class IdentityFix(Frozen):
    """``track: N, identity: NAME``: that track becomes another identity on these frames."""

    frames: FixFrames
    """The frames fixed (the plate's own numbers, inclusive), within the shot's rendered frames."""
    track: int = Field(ge=0, lt=FIX_TRACK_BASE)
    """The track, as the QC report, ``summary.json`` and the ``tracks`` pass number it."""
    identity: str
    """The identity rendered instead: declared in ``identities:`` and cleared like any other."""


class BoxFix(Frozen):
    """``box: {frame: [x0, y0, x1, y1], ...}``: a face the detector missed, rendered like any face."""

    frames: FixFrames
    """The frames fixed (the plate's own numbers, inclusive), within the shot's rendered frames."""
    box: dict[BoxKey, Box] = Field(min_length=1, max_length=MAX_BOX_KEYS)
    """Keyframed boxes in pixels (frame -> ``[x0, y0, x1, y1]``), linear between keys and held
    before the first and after the last.  Keys are frames of the shot; a box lies within the plate
    (``0 <= x0 < x1 <= width``, ``0 <= y0 < y1 <= height``, the stored pixels)."""
    identity: str | None = None
    """Who the face becomes; None: the shot's ``selection.source`` (or its first reference's source)."""

    @field_validator("box")
    @classmethod
    def _boxes(cls, boxes: dict[int, Box]) -> dict[int, Box]:
        for frame, (x0, y0, x1, y1) in boxes.items():
            if not (x1 > x0 and y1 > y0):
                raise ValueError(
                    f"box at frame {frame} must have x1 > x0 and y1 > y0, got {[x0, y0, x1, y1]}"
                )
        return dict(sorted(boxes.items()))


class FacesFix(Frozen):
    """``faces: {...}``: render settings (blend, mask, enhancer) for these frames only."""

    frames: FixFrames
    """The frames fixed (the plate's own numbers, inclusive), within the shot's rendered frames."""
    faces: FaceConfig
    """The ``faces`` keys to change on these frames: ``enhance``, ``enhance_blend``, ``occlusion``,
    ``color_match``, ``mask_erode``, ``mask_blur`` (the others belong to the whole shot)."""

    @model_validator(mode="after")
    def _render_keys_only(self) -> FacesFix:
        other = sorted(self.faces.model_fields_set - set(RENDER_FACE_FIELDS))
        if other:
            raise ValueError(f"faces.{other[0]} applies to the whole shot, not to a fix's frames")
        if not self.faces.model_fields_set:
            raise ValueError("faces needs at least one key")
        return self


def _kind(data: Any) -> str | None:
    """Which kind of fix ``data`` is (a mapping from YAML, or a fix already made)."""
    if isinstance(data, Frozen):
        kinds = {KeepPlateFix: "keep_plate", IdentityFix: "identity", BoxFix: "box", FacesFix: "faces"}
        return kinds.get(type(data))
    if not isinstance(data, dict):
        return None
    for key, kind in (("action", "keep_plate"), ("box", "box"), ("faces", "faces"), ("identity", "identity")):
        if key in data:
            return kind
    return None


ShotFix = Annotated[
    Annotated[KeepPlateFix, Tag("keep_plate")]
    | Annotated[IdentityFix, Tag("identity")]
    | Annotated[BoxFix, Tag("box")]
    | Annotated[FacesFix, Tag("faces")],
    Discriminator(
        _kind,
        custom_error_type="fix_kind",
        custom_error_message="a fix needs one of 'action: keep_plate', 'identity', 'box' or 'faces'",
    ),
]
"""One fix of a shot: keep the plate, another identity, a missed face's box, or render settings."""


def fix_label(index: int, fix: KeepPlateFix | IdentityFix | BoxFix | FacesFix) -> str:
    """``fix 2 (frames 1013-1028, track 2)``: how the summary and errors name a fix."""
    track = getattr(fix, "track", None)
    return f"fix {index} (frames {fix.frames}" + (f", track {track})" if track is not None else ")")


def fix_kind(fix: KeepPlateFix | IdentityFix | BoxFix | FacesFix) -> str:
    """``keep_plate``, ``identity``, ``box`` or ``faces``."""
    return _kind(fix) or "faces"


def fix_action(fix: KeepPlateFix | IdentityFix | BoxFix | FacesFix) -> str:
    """What a fix does, in words (the report's timeline marks): ``keep the plate``, ``identity double``..."""
    if isinstance(fix, KeepPlateFix):
        return "keep the plate"
    if isinstance(fix, IdentityFix):
        return f"identity {fix.identity}"
    if isinstance(fix, BoxFix):
        keys = f"{len(fix.box)} key{'s' if len(fix.box) > 1 else ''}"
        return f"missed face, box ({keys})" + (f" as {fix.identity}" if fix.identity else "")
    return "faces: " + ", ".join(sorted(fix.faces.model_fields_set))


def check_fix_frames(
    fixes: tuple[KeepPlateFix | IdentityFix | BoxFix | FacesFix, ...],
    info: VideoInfo,
    delivered: tuple[int, int],
    field: str,
) -> None:
    """SpecError naming ``<field>.fixes[j]`` when a fix names a frame the shot does not render, a box
    key on a frame the plate does not have, or a box that is not within the plate's pixels."""
    first, last = info.frame_number(delivered[0]), info.frame_number(delivered[1] - 1)
    plate = (info.frame_number(0), info.frame_number(info.frame_count - 1))
    for j, fix in enumerate(fixes):
        if fix.frames.first < first or fix.frames.last > last:
            raise SpecError(
                f"{field}.fixes[{j}]",
                f"frames {fix.frames} are outside the shot, which renders frames {first}-{last}",
            )
        if isinstance(fix, BoxFix):
            _check_box(fix, f"{field}.fixes[{j}]", frames=plate, info=info)


def _check_box(fix: BoxFix, name: str, *, frames: tuple[int, int], info: VideoInfo) -> None:
    keys = list(fix.box)  # sorted when read
    if keys[0] < frames[0] or keys[-1] > frames[1]:
        outside = keys[0] if keys[0] < frames[0] else keys[-1]
        raise SpecError(
            f"{name}.box",
            f"key frame {outside} is not a frame of the shot, whose frames are {frames[0]}-{frames[1]}",
        )
    for frame, (x0, y0, x1, y1) in fix.box.items():
        if x1 > info.width or y1 > info.height:  # 0 <= x0 < x1 and 0 <= y0 < y1: checked when read
            raise SpecError(
                f"{name}.box",
                f"the box at frame {frame} ({x0:g}, {y0:g}, {x1:g}, {y1:g}) is not within the plate, "
                f"which is {info.width}x{info.height} pixels",
            )


def contradicting_fixes(
    fixes: tuple[KeepPlateFix | IdentityFix | BoxFix | FacesFix, ...],
) -> tuple[int, int] | None:
    """The indexes ``(j, k)``, ``j < k``, of two fixes that say different things of one track on
    overlapping frames (``keep_plate`` and an identity, or two different identities), or None.

    Sorted by track and first frame, then one pass: of the fixes of a track seen so far, the one
    reaching furthest, and the one reaching furthest among those that say something else, are the
    only ones a fix can overlap first with a different outcome (O(n log n), never every pair)."""
    spans = sorted(
        (fix.track, fix.frames.first, j, fix.frames.last, fix_action(fix))
        for j, fix in enumerate(fixes)
        if isinstance(fix, KeepPlateFix | IdentityFix)
    )
    track: int | None = None
    best: tuple[int, int, str] | None = None  # (last frame, index, what it says)
    other: tuple[int, int, str] | None = None  # the furthest of those saying other than ``best``
    for tr, start, j, last, says in spans:
        if tr != track:
            track, best, other = tr, None, None
        for seen in (best, other):
            if seen is not None and seen[2] != says and seen[0] >= start:
                return (min(seen[1], j), max(seen[1], j))
        here = (last, j, says)
        if best is None or last > best[0]:
            if best is not None and best[2] != says:
                other = best
            best = here
        elif best[2] != says and (other is None or last > other[0]):
            other = here
    return None


def fix_ops(
    fixes: tuple[KeepPlateFix | IdentityFix | BoxFix | FacesFix, ...],
    *,
    first_number: int,
    default_identity: str | None,
    field: str,
) -> list[FixOp]:
    """The fixes as the plan applies them (:mod:`pipeline.tracking.fixes`): shot frame indices, where
    index 0 is the frame numbered ``first_number``."""
    ops: list[FixOp] = []
    for j, fix in enumerate(fixes):
        name, label = f"{field}.fixes[{j}]", fix_label(j, fix)
        start, end = fix.frames.first - first_number, fix.frames.last - first_number + 1
        span = FixSpan(name=name, label=label, start=start, end=end)
        if isinstance(fix, KeepPlateFix):
            ops.append(KeepPlate(span=span, track=fix.track))
        elif isinstance(fix, IdentityFix):
            ops.append(SwitchIdentity(span=span, track=fix.track, identity=fix.identity))
        elif isinstance(fix, BoxFix):
            identity = fix.identity or default_identity
            if identity is None:
                raise SpecError(name, "give the fix an identity: the shot's selection names no single source")
            keys = {k - first_number: v for k, v in fix.box.items()}
            ops.append(AddBox(span=span, keys=keys, identity=identity))
        else:
            overrides = {k: getattr(fix.faces, k) for k in sorted(fix.faces.model_fields_set)}
            ops.append(FaceSettings(span=span, faces=overrides))
    return ops


def fixes_of_chunk(
    fixes: tuple[KeepPlateFix | IdentityFix | BoxFix | FacesFix, ...], first: int, last: int
) -> list[dict[str, Any]]:
    """The fixes touching frames ``first``-``last`` (plate numbers, inclusive), canonical: what enters
    that chunk's render key (empty: the key is the one of a shot without fixes)."""
    return [
        {"kind": _kind(fix), **fix.model_dump(mode="json")}
        for fix in fixes
        if fix.frames.first <= last and first <= fix.frames.last
    ]


def fix_records(fixes: tuple[KeepPlateFix | IdentityFix | BoxFix | FacesFix, ...]) -> list[dict[str, Any]]:
    """What the manifest keeps of a shot's fixes, for the next run to say which changed: each fix's
    digest, frames and label."""
    out = []
    for j, fix in enumerate(fixes):
        canonical = json.dumps(fix.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
        out.append(
            {
                "digest": hashlib.sha256(canonical.encode()).hexdigest(),
                "frames": [fix.frames.first, fix.frames.last],
                "label": fix_label(j, fix),
            }
        )
    return out


def rerender_reasons(
    now: list[dict[str, Any]], earlier: list[dict[str, Any]], first: int, last: int
) -> list[str]:
    """Why a chunk of frames ``first``-``last`` is rendered again: the fixes (:func:`fix_records`) on its
    frames that are new or changed since the earlier run, and the earlier ones on its frames now gone."""
    before = {r["digest"] for r in earlier}
    after = {r["digest"] for r in now}

    def touches(record: dict[str, Any]) -> bool:
        return bool(record["frames"][0] <= last and first <= record["frames"][1])

    reasons = [f"{r['label']} changed" for r in now if touches(r) and r["digest"] not in before]
    reasons += [
        f"{r['label']} of the earlier run removed" for r in earlier if touches(r) and r["digest"] not in after
    ]
    return reasons
