"""What QC measures while a chunk renders (in the actor) and what it concludes (in the driver).

The actor measures each replaced face in each frame where it already has the
pixels (:class:`FaceMeasure`); the driver adds what it knows from tracking and
the face plan, and turns both into numbers per frame and flags (:class:`Flag`).
Every record is plain data (JSON in the manifest and the reports).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

GRID = 4
"""Face regions are summarised as the mean colour of a GRID x GRID grid over the face box."""


@dataclass(frozen=True)
class FaceMeasure:
    """One replaced face in one frame, measured by the actor that rendered it.

    ``frame`` is the source frame index (position), ``track`` the track id, ``identity`` the
    source identity rendered.  ``similarity_after``: cosine, in the pack's recognizer space,
    between the face in the output and that identity (None: not measured on this frame).
    ``out_grid`` / ``plate_grid``: GRID x GRID x 3 mean colours of the face box in the output
    and in the plate, on a 0-1 scale (flicker is compared frame to frame by the driver).
    ``seam``: mean gradient across the matte edge in the output divided by the plate's there
    (1.0: the edge is as smooth as the plate; large: a visible seam).  ``matte``: the mean
    matte inside the face box.
    """

    frame: int
    track: int
    identity: str
    similarity_after: float | None
    out_grid: tuple[float, ...]
    plate_grid: tuple[float, ...]
    seam: float
    matte: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> FaceMeasure:
        return cls(
            frame=int(d["frame"]),
            track=int(d["track"]),
            identity=str(d["identity"]),
            similarity_after=None if d["similarity_after"] is None else float(d["similarity_after"]),
            out_grid=tuple(float(v) for v in d["out_grid"]),
            plate_grid=tuple(float(v) for v in d["plate_grid"]),
            seam=float(d["seam"]),
            matte=float(d["matte"]),
        )


@dataclass(frozen=True)
class Flag:
    """A frame (or run of frames) a supervisor should look at, and why.

    ``first``/``last`` are frame numbers in the source's numbering (a sequence's own,
    a video's from 0); ``reason`` is one of :data:`REASONS`; ``severity`` 0-1 sorts the
    review list; ``value`` is the measured number that crossed ``threshold``.
    """

    shot: str
    first: int
    last: int
    track: int | None
    reason: str
    severity: float
    value: float
    threshold: float
    detail: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """:func:`dataclasses.asdict` of the flag, field by field (a review list has thousands)."""
        return {
            "shot": self.shot,
            "first": self.first,
            "last": self.last,
            "track": self.track,
            "reason": self.reason,
            "severity": self.severity,
            "value": self.value,
            "threshold": self.threshold,
            "detail": self.detail,
            "extra": _copied(self.extra),
        }


def _copied(value: Any) -> Any:
    """A copy of plain data, its lists and dicts copied all the way down (as :func:`asdict` copies them)."""
    if isinstance(value, dict):
        return {k: _copied(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_copied(v) for v in value)
    return value


REASONS = (
    "unreplaced",  # frames inside a replaced track where the face was left as the plate's
    "low_identity",  # the output face is far from the identity it should be
    "identity_switch",  # a track's faces look like another reference than the one decided
    "jitter",  # landmarks shake after smoothing
    "flicker",  # the replaced region changes frame to frame more than the plate does there
    "seam",  # the matte edge is visible in the output
)


def flag_counts(flags: Sequence[Flag]) -> dict[str, int]:
    """Number of ``flags`` per reason (every reason of :data:`REASONS` present, zeros included)."""
    out = dict.fromkeys(REASONS, 0)
    for flag in flags:
        out[flag.reason] = out.get(flag.reason, 0) + 1
    return out


def failed_reasons(flags: Sequence[Flag], fail_on: Iterable[str]) -> list[str]:
    """Reasons among ``flags`` that ``fail_on`` (``qc.fail_on``) gates on, in :data:`REASONS` order."""
    present, gated = {f.reason for f in flags}, set(fail_on)
    return [r for r in REASONS if r in present and r in gated]


def review_peaks(flags: Sequence[Flag], limit: int) -> list[int]:
    """Frame numbers of the worst frame of each of the ``limit`` worst flags (to take thumbnails of)."""
    return [int(f.extra.get("peak", f.first)) for f in flags[:limit]]
