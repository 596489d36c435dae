"""How faces are tracked through a shot and smoothed: the settings of :mod:`pipeline.tracking.tracker`
and :mod:`pipeline.tracking.faceplan` (also importable from the tracker, where they are used)."""

from __future__ import annotations

from pydantic import Field

from pipeline.configbase import Frozen


class TrackingConfig(Frozen):
    """How faces are tracked through a shot and how their landmarks are smoothed.

    Frequencies are in cycles per *frame* (multiply by the frame rate for Hz),
    and speeds in face sizes per frame, so the same settings behave the same
    for any resolution and face size.
    """

    iou_threshold: float = Field(0.3, ge=0.0, le=1.0)
    """Minimum IoU between a track's predicted box and a detection to associate them."""
    embedding_threshold: float = Field(0.3, ge=-1.0, le=1.0)
    """Minimum cosine similarity (track mean embedding vs detection) to associate
    them when the boxes do not overlap enough (fast motion, re-appearance after a gap)."""
    embedding_weight: float = Field(1.0, ge=0.0)
    """Weight of the cosine similarity against IoU in the assignment score
    ``iou + embedding_weight * cosine``; this is what keeps crossing faces apart."""
    max_gap_frames: int = Field(5, ge=0)
    """Longest run of missed detections a track survives; the gap is bridged by
    interpolation in the plan.  A track unseen for longer ends."""
    stitch_threshold: float = Field(0.5, ge=-1.0, le=1.0)
    """At planning time, a track that starts at most ``max_gap_frames`` after another
    ended is joined to it when their mean embeddings reach this cosine: a face that
    comes out from behind another is often re-detected too late or too occluded to be
    associated online, and must not restart as a new track (or a new identity)."""
    occluded_overlap: float = Field(0.5, ge=0.0, le=1.0)
    """A bridged (interpolated) face whose box is covered by at least this fraction by
    another detected face is hidden behind it: it gets no task, so nothing is pasted
    over the face in front."""
    min_track_frames: int = Field(1, ge=1)
    """Tracks with fewer detections than this get no tasks (drops one-frame false positives)."""
    smoothing: bool = True
    """Smooth each track's landmarks and box over time (zero-phase One-Euro filter)."""
    smoothing_min_cutoff_hz: float = Field(0.96, gt=0.0, le=100.0)
    """One-Euro cutoff at rest, in Hz of shot time (lower = steadier still faces).
    Cutoffs are in seconds, not frames, so 24, 30 and 60 fps plates are smoothed alike."""
    smoothing_beta: float = Field(8.0, ge=0.0)
    """How fast the cutoff rises with speed: Hz per face size per second of motion;
    higher = less lag on motion."""
    smoothing_derivative_cutoff_hz: float = Field(2.4, gt=0.0, le=100.0)
    """Cutoff of the speed estimate that drives the adaptation, in Hz."""
