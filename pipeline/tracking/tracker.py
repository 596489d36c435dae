"""Frame-to-frame face association with a small state carried across chunks.

Why this exists, and how it keeps chunks parallel
-------------------------------------------------
A shot is rendered in chunks on many actors, yet the result must equal a
one-pass render: same track ids, same identity per track, same smoothed
landmarks.  The work is split in three stages so that only a cheap step is
sequential:

1. *Analysis* (parallel, per chunk, on actors): decode + detect + embed every
   frame into a ``list[Face]``.  Detection is per frame and deterministic, so
   chunking cannot change it.
2. *Tracking and planning* (sequential, cheap, on the driver, pure numpy):
   :class:`Tracker` consumes the per-frame faces chunk after chunk, in order,
   carrying a :class:`TrackerState` (a few boxes and embedding sums, JSON
   serialisable, recorded per chunk for resume) across each boundary, so the
   ids of a chunked run equal those of one pass.  Then
   :func:`pipeline.tracking.faceplan.plan_shot` sees the whole shot at once: identity
   per track, gap bridging, non-causal landmark smoothing.  Its output is the
   per-frame list of :class:`~pipeline.geometry.types.FaceTask`.
3. *Render* (parallel, per chunk, on actors): swap/enhance/paste from the
   tasks of the chunk's frame range.  It needs no state, so chunk seams cannot
   show.

Association (this module) uses a constant-velocity prediction of each track's
box centre, box overlap (IoU) and cosine similarity between the track's
accumulated mean embedding and the detection's embedding, solved as one
assignment per frame (Hungarian), which is what keeps two faces apart when
their boxes cross.  What online association cannot see (a face re-detected
late and half covered after passing behind another) is repaired by the
planner, which stitches tracks by embedding over the whole shot.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from pydantic import Field
from scipy.optimize import linear_sum_assignment

from pipeline.configbase import Frozen
from pipeline.geometry.boxes import box_iou
from pipeline.geometry.types import Face

logger = logging.getLogger(__name__)

STATE_VERSION = 1


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


@dataclass(frozen=True)
class TrackObservation:
    """One detection of one track in one frame (the tracker's output, regrouped per track)."""

    frame_index: int
    track_id: int
    box: np.ndarray  # (4,) float32
    landmarks: np.ndarray  # (5, 2) float32
    score: float
    embedding: np.ndarray | None  # (D,) float32, L2-normalised


@dataclass
class ActiveTrack:
    """What the tracker remembers about one live track.

    Numbers are float64 so that ``to_dict``/``from_dict`` round-trips them exactly
    (Python floats print and parse losslessly), which is what makes a resumed
    chunk associate exactly as the uninterrupted run did.
    """

    track_id: int
    last_frame: int
    box: np.ndarray  # (4,) float64, last observed box
    velocity: np.ndarray  # (2,) float64, box centre change per frame
    landmarks: np.ndarray  # (5, 2) float64, last observed landmarks
    embedding_sum: np.ndarray | None  # (D,) float64
    embedding_count: int
    hits: int

    def predicted_box(self, frame_index: int) -> np.ndarray:
        # Only the centre is extrapolated: box size changes mostly come from partial
        # occlusion and detector noise, and extrapolating them shrinks boxes to nothing.
        shift = self.velocity * float(frame_index - self.last_frame)
        return self.box + np.concatenate([shift, shift])

    def mean_embedding(self) -> np.ndarray | None:
        if self.embedding_sum is None or self.embedding_count == 0:
            return None
        norm = float(np.linalg.norm(self.embedding_sum))
        return self.embedding_sum / norm if norm > 0 else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "track_id": self.track_id,
            "last_frame": self.last_frame,
            "box": self.box.tolist(),
            "velocity": self.velocity.tolist(),
            "landmarks": self.landmarks.tolist(),
            "embedding_sum": None if self.embedding_sum is None else self.embedding_sum.tolist(),
            "embedding_count": self.embedding_count,
            "hits": self.hits,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ActiveTrack:
        emb = d["embedding_sum"]
        return cls(
            track_id=int(d["track_id"]),
            last_frame=int(d["last_frame"]),
            box=np.asarray(d["box"], dtype=np.float64).reshape(4),
            velocity=np.asarray(d["velocity"], dtype=np.float64).reshape(2),
            landmarks=np.asarray(d["landmarks"], dtype=np.float64).reshape(5, 2),
            embedding_sum=None if emb is None else np.asarray(emb, dtype=np.float64),
            embedding_count=int(d["embedding_count"]),
            hits=int(d["hits"]),
        )


@dataclass
class TrackerState:
    """Everything the tracker needs to continue a shot at the next chunk.

    Small (one box, velocity, landmarks and embedding sum per live track) and
    JSON-serialisable through :meth:`to_dict`; record it with each chunk's
    result so a resumed job continues exactly where it stopped.
    """

    next_track_id: int = 0
    last_frame: int | None = None  # last frame index the tracker has seen
    tracks: list[ActiveTrack] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": STATE_VERSION,
            "next_track_id": self.next_track_id,
            "last_frame": self.last_frame,
            "tracks": [t.to_dict() for t in self.tracks],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TrackerState:
        if d.get("version") != STATE_VERSION:
            raise ValueError(f"TrackerState version {d.get('version')!r} is not {STATE_VERSION}")
        return cls(
            next_track_id=int(d["next_track_id"]),
            last_frame=None if d["last_frame"] is None else int(d["last_frame"]),
            tracks=[ActiveTrack.from_dict(t) for t in d["tracks"]],
        )

    def copy(self) -> TrackerState:
        return TrackerState.from_dict(self.to_dict())


def _box_iou_few(a_boxes: Sequence[np.ndarray], b_boxes: Sequence[np.ndarray]) -> np.ndarray:
    """:func:`box_iou` for a few boxes, in plain floats: the same float64 arithmetic, in the same
    order, without numpy's per-call overhead (most frames have one or two faces)."""
    out = np.zeros((len(a_boxes), len(b_boxes)), dtype=np.float64)
    b_list = [[float(v) for v in b] for b in b_boxes]
    for r, a in enumerate(a_boxes):
        a0, a1, a2, a3 = (float(v) for v in a)
        area_a = max(a2 - a0, 0.0) * max(a3 - a1, 0.0)
        for c, (b0, b1, b2, b3) in enumerate(b_list):
            inter = max(min(a2, b2) - max(a0, b0), 0.0) * max(min(a3, b3) - max(a1, b1), 0.0)
            union = area_a + max(b2 - b0, 0.0) * max(b3 - b1, 0.0) - inter
            out[r, c] = inter / union if union > 0 else 0.0
    return out


_FEW_PAIRS = 16
"""Up to this many track x face pairs, IoU is computed in plain floats."""


class Tracker:
    """Associates each frame's detections with live tracks; one instance per shot.

    Feed frames in increasing order (a frame with no faces may be skipped or
    passed as an empty list: expiry is computed from frame indices).
    """

    # Velocity is an average of recent per-frame centre changes; blending damps
    # detector jitter so a noisy box does not throw the prediction off.
    _VELOCITY_BLEND = 0.5

    def __init__(self, config: TrackingConfig, state: TrackerState | None = None) -> None:
        self.config = config
        self._state = state.copy() if state is not None else TrackerState()

    def state(self) -> TrackerState:
        """A deep copy of the current state (safe to serialise or keep)."""
        return self._state.copy()

    def update(self, frame_index: int, faces: Sequence[Face]) -> list[int]:
        """Assign a track id to each face of frame ``frame_index`` (same order as ``faces``)."""
        st = self._state
        if st.last_frame is not None and frame_index <= st.last_frame:
            raise ValueError(
                f"frame_index {frame_index} must be greater than the last frame tracked ({st.last_frame})"
            )
        cfg = self.config
        # Tracks unseen for longer than the allowed gap can never match again: end them.
        st.tracks = [t for t in st.tracks if frame_index - t.last_frame - 1 <= cfg.max_gap_frames]
        st.last_frame = frame_index
        ids = [-1] * len(faces)
        if len(faces) == 1 and len(st.tracks) == 1:
            # One face, one track (most frames of most shots): the assignment is that pair or nothing.
            if self._admissible(frame_index, st.tracks[0], faces[0]):
                self._extend(st.tracks[0], frame_index, faces[0])
                ids[0] = st.tracks[0].track_id
        elif faces and st.tracks:
            score, admissible = self._scores(frame_index, faces)
            # Inadmissible pairs get a score no admissible set can beat, then are discarded.
            cost = np.where(admissible, -score, 1e6)
            rows, cols = linear_sum_assignment(cost)
            for r, c in zip(rows.tolist(), cols.tolist()):
                if admissible[r, c]:
                    self._extend(st.tracks[r], frame_index, faces[c])
                    ids[c] = st.tracks[r].track_id
        for i, face in enumerate(faces):
            if ids[i] < 0:
                ids[i] = self._start(frame_index, face)
        return ids

    def _scores(self, frame_index: int, faces: Sequence[Face]) -> tuple[np.ndarray, np.ndarray]:
        cfg = self.config
        tracks = self._state.tracks
        predicted = [t.predicted_box(frame_index) for t in tracks]
        boxes = [np.asarray(f.box, np.float64) for f in faces]
        if len(predicted) * len(boxes) <= _FEW_PAIRS:
            iou = _box_iou_few(predicted, boxes)
        else:
            iou = box_iou(np.stack(predicted), np.stack(boxes))
        cos = np.zeros_like(iou)
        has_cos = np.zeros(iou.shape, dtype=bool)
        for r, t in enumerate(tracks):
            mean = t.mean_embedding()
            if mean is None:
                continue
            for c, f in enumerate(faces):
                if f.embedding is not None and f.embedding.shape == mean.shape:
                    cos[r, c] = float(np.dot(mean, np.asarray(f.embedding, np.float64)))
                    has_cos[r, c] = True
        admissible = (iou >= cfg.iou_threshold) | (has_cos & (cos >= cfg.embedding_threshold))
        score = iou + cfg.embedding_weight * np.where(has_cos, cos, 0.0)
        return score, admissible

    def _admissible(self, frame_index: int, track: ActiveTrack, face: Face) -> bool:
        """:meth:`_scores`' admissibility for one track and one face, the same float64 arithmetic."""
        cfg = self.config
        iou = float(
            _box_iou_few([track.predicted_box(frame_index)], [np.asarray(face.box, np.float64)])[0, 0]
        )
        if iou >= cfg.iou_threshold:
            return True
        mean = track.mean_embedding()
        if mean is None or face.embedding is None or face.embedding.shape != mean.shape:
            return False
        return float(np.dot(mean, np.asarray(face.embedding, np.float64))) >= cfg.embedding_threshold

    def _extend(self, track: ActiveTrack, frame_index: int, face: Face) -> None:
        box = np.asarray(face.box, np.float64)
        dt = float(frame_index - track.last_frame)
        inst = ((box[:2] + box[2:]) - (track.box[:2] + track.box[2:])) / (2.0 * dt)
        track.velocity = (
            inst
            if track.hits == 1
            else (self._VELOCITY_BLEND * track.velocity + (1.0 - self._VELOCITY_BLEND) * inst)
        )
        track.box = box
        track.landmarks = np.asarray(face.landmarks, np.float64)
        track.last_frame = frame_index
        track.hits += 1
        if face.embedding is not None:
            emb = np.asarray(face.embedding, np.float64)
            if track.embedding_sum is None:
                track.embedding_sum = emb.copy()
            elif track.embedding_sum.shape == emb.shape:
                track.embedding_sum = track.embedding_sum + emb
            track.embedding_count += 1

    def _start(self, frame_index: int, face: Face) -> int:
        st = self._state
        track_id = st.next_track_id
        st.next_track_id += 1
        emb = None if face.embedding is None else np.asarray(face.embedding, np.float64).copy()
        st.tracks.append(
            ActiveTrack(
                track_id=track_id,
                last_frame=frame_index,
                box=np.asarray(face.box, np.float64).copy(),
                velocity=np.zeros(2, dtype=np.float64),
                landmarks=np.asarray(face.landmarks, np.float64).copy(),
                embedding_sum=emb,
                embedding_count=0 if emb is None else 1,
                hits=1,
            )
        )
        return track_id


def track_chunk(
    faces_per_frame: Sequence[Sequence[Face]],
    first_frame: int,
    config: TrackingConfig,
    state_in: TrackerState | None,
) -> tuple[list[list[int]], TrackerState]:
    """Track one chunk (frames ``first_frame ...``) starting from ``state_in``.

    Returns the track id of every face, per frame, and the state to hand to
    the next chunk.  Chaining chunks in order gives exactly the ids of one pass.
    """
    tracker = Tracker(config, state_in)
    ids = [tracker.update(first_frame + i, faces) for i, faces in enumerate(faces_per_frame)]
    return ids, tracker.state()
