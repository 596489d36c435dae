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

The live tracks are held as arrays (one row per track) and a chunk's detections
are converted once (:mod:`pipeline.tracking.frames`), so each frame's predictions,
overlaps, cosines and updates are array operations over all tracks and faces,
not a Python loop per pair: a crowd of twelve faces costs about what three did.
The arithmetic is the per-pair code's, in the same order (cosines through
``np.vecdot``, which takes each pair's dot product as ``np.dot`` does), so ids and
states are bit-identical to it (``tests/tracking_reference.py`` keeps that code).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.optimize import linear_sum_assignment

from pipeline.geometry.types import Face
from pipeline.tracking.config import TrackingConfig
from pipeline.tracking.frames import FrameArrays, by_shape, chunk_arrays, iou_matrix, iou_pair

logger = logging.getLogger(__name__)

STATE_VERSION = 1

_FEW_OVERLAPS = 16
"""Up to this many track x face pairs, a frame's box overlaps are computed in plain floats."""

_FEW_PAIRS = 4
"""Up to this many pairs (or track x face pairs for the overlaps), a frame's updates are done one
pair at a time in plain floats: numpy's fixed cost per call outweighs the arrays for so few."""


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


@dataclass
class _Live:
    """The live tracks as arrays, one row per track, in the order of ``TrackerState.tracks``.

    What the tracker works on inside a chunk: a frame's predictions, overlaps and updates are
    array operations over all tracks at once.  Embedding sums stay one array per track (a
    track may have none, and nothing forces every detector to give the same length).
    """

    ids: np.ndarray  # (N,) int64
    last: np.ndarray  # (N,) int64
    box: np.ndarray  # (N, 4) float64
    velocity: np.ndarray  # (N, 2) float64
    landmarks: np.ndarray  # (N, 5, 2) float64
    hits: np.ndarray  # (N,) int64
    emb_sum: list[np.ndarray | None]
    emb_count: list[int]
    mean_by_id: dict[int, np.ndarray | None] = field(default_factory=dict)
    """Unit mean embeddings computed so far, by track id (dropped when the track's sum changes)."""

    @classmethod
    def of(cls, tracks: Sequence[ActiveTrack]) -> _Live:
        return cls(
            ids=np.array([t.track_id for t in tracks], dtype=np.int64),
            last=np.array([t.last_frame for t in tracks], dtype=np.int64),
            box=np.array([t.box for t in tracks], dtype=np.float64).reshape(-1, 4),
            velocity=np.array([t.velocity for t in tracks], dtype=np.float64).reshape(-1, 2),
            landmarks=np.array([t.landmarks for t in tracks], dtype=np.float64).reshape(-1, 5, 2),
            hits=np.array([t.hits for t in tracks], dtype=np.int64),
            emb_sum=[None if t.embedding_sum is None else t.embedding_sum.copy() for t in tracks],
            emb_count=[t.embedding_count for t in tracks],
        )

    def tracks(self) -> list[ActiveTrack]:
        sums = [None if e is None else e.copy() for e in self.emb_sum]
        return [
            ActiveTrack(
                track_id=int(self.ids[r]),
                last_frame=int(self.last[r]),
                box=self.box[r].copy(),
                velocity=self.velocity[r].copy(),
                landmarks=self.landmarks[r].copy(),
                embedding_sum=sums[r],
                embedding_count=self.emb_count[r],
                hits=int(self.hits[r]),
            )
            for r in range(len(self.ids))
        ]

    def keep(self, rows: np.ndarray) -> None:
        """Keep only the tracks where ``rows`` (bool, (N,)) is True, in order."""
        self.ids, self.last, self.hits = self.ids[rows], self.last[rows], self.hits[rows]
        self.box, self.velocity, self.landmarks = self.box[rows], self.velocity[rows], self.landmarks[rows]
        picked = np.flatnonzero(rows).tolist()
        self.emb_sum = [self.emb_sum[r] for r in picked]
        self.emb_count = [self.emb_count[r] for r in picked]
        kept = set(self.ids.tolist())
        self.mean_by_id = {k: v for k, v in self.mean_by_id.items() if k in kept}

    def means(self) -> list[np.ndarray | None]:
        """Each track's unit mean embedding (None: no embedding yet, or a zero sum)."""
        ids = self.ids.tolist()
        todo = [r for r, i in enumerate(ids) if i not in self.mean_by_id]
        if todo and len(todo) <= _FEW_PAIRS:
            # A few sums changed (the usual frame): one at a time, as ``np.linalg.norm`` takes each.
            for r in todo:
                total = self.emb_sum[r]
                mean = None
                if total is not None and self.emb_count[r] > 0:
                    norm = (
                        float(np.linalg.norm(total))
                        if total.ndim != 1
                        else math.sqrt(float(np.dot(total, total)))
                    )
                    mean = total / norm if norm > 0 else None
                self.mean_by_id[ids[r]] = mean
        elif todo:
            missing: list[np.ndarray | None] = [None] * len(self.emb_sum)
            for r in todo:
                missing[r] = self.emb_sum[r] if self.emb_count[r] > 0 else None
            for r in todo:
                self.mean_by_id[ids[r]] = None
            for rows in by_shape(missing).values():
                sums = np.stack([self.emb_sum[r] for r in rows])  # type: ignore[misc]
                flat = sums.reshape(len(rows), -1)
                # ``np.linalg.norm`` of a vector is ``sqrt(dot(x, x))``; ``vecdot`` is that dot, row by row.
                norms = np.sqrt(np.vecdot(flat, flat))
                for k, r in enumerate(rows):
                    norm = float(norms[k])
                    if norm > 0:
                        self.mean_by_id[ids[r]] = sums[k] / norm
        return [self.mean_by_id[i] for i in ids]


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
        state = state if state is not None else TrackerState()
        self._next_track_id = state.next_track_id
        self._last_frame = state.last_frame
        self._live = _Live.of(state.tracks)

    def state(self) -> TrackerState:
        """A deep copy of the current state (safe to serialise or keep)."""
        return TrackerState(
            next_track_id=self._next_track_id, last_frame=self._last_frame, tracks=self._live.tracks()
        )

    def update(self, frame_index: int, faces: Sequence[Face]) -> list[int]:
        """Assign a track id to each face of frame ``frame_index`` (same order as ``faces``)."""
        return self._step(frame_index, chunk_arrays([faces])[0])

    def _step(self, frame_index: int, frame: FrameArrays) -> list[int]:
        if self._last_frame is not None and frame_index <= self._last_frame:
            raise ValueError(
                f"frame_index {frame_index} must be greater than the last frame tracked ({self._last_frame})"
            )
        live = self._live
        # Tracks unseen for longer than the allowed gap can never match again: end them.
        alive = frame_index - live.last - 1 <= self.config.max_gap_frames
        if not alive.all():
            live.keep(alive)
        self._last_frame = frame_index
        n = len(frame.embeddings)
        ids = [-1] * n
        if n == 1 and len(live.ids) == 1:
            # One face, one track (most frames of most shots): that pair or nothing, in plain floats.
            pairs = [(0, 0)] if self._admissible_one(frame_index, frame) else []
            if pairs:
                self._extend(frame_index, frame, pairs)
                ids[0] = int(live.ids[0])
        elif n and len(live.ids):
            score, admissible = self._scores(frame_index, frame)
            # Inadmissible pairs get a score no admissible set can beat, then are discarded.
            rows, cols = linear_sum_assignment(np.where(admissible, -score, 1e6))
            pairs = [(r, c) for r, c in zip(rows.tolist(), cols.tolist()) if admissible[r, c]]
            if pairs:
                self._extend(frame_index, frame, pairs)
                for r, c in pairs:
                    ids[c] = int(live.ids[r])
        new = [c for c in range(n) if ids[c] < 0]
        if new:
            for c, track_id in zip(new, self._start(frame_index, frame, new)):
                ids[c] = track_id
        return ids

    def _scores(self, frame_index: int, frame: FrameArrays) -> tuple[np.ndarray, np.ndarray]:
        """Score and admissibility of every (track, face) pair of the frame."""
        cfg = self.config
        live = self._live
        # Only the centre is extrapolated: box size changes mostly come from partial
        # occlusion and detector noise, and extrapolating them shrinks boxes to nothing.
        if len(live.ids) * len(frame.embeddings) <= _FEW_OVERLAPS:
            iou = np.array(self._overlaps_few(frame_index, frame), dtype=np.float64)
        else:
            shift = live.velocity * (frame_index - live.last).astype(np.float64)[:, None]
            iou = iou_matrix(live.box + np.concatenate([shift, shift], axis=1), frame.boxes)
        means = live.means()
        if frame.matrix is not None and all(
            m is not None and m.shape == frame.matrix.shape[1:] for m in means
        ):
            # Every track and every face has a (D,) embedding (the usual frame): one product, all pairs.
            cos = np.vecdot(np.stack(means)[:, None, :], frame.matrix[None, :, :])  # type: ignore[arg-type]
            admissible = (iou >= cfg.iou_threshold) | (cos >= cfg.embedding_threshold)
            return iou + cfg.embedding_weight * cos, admissible
        cos = np.zeros_like(iou)
        has_cos = np.zeros(iou.shape, dtype=bool)
        track_groups = by_shape(means)
        for shape, cols in by_shape(frame.embeddings).items():
            rows = track_groups.get(shape)
            if not rows:
                continue
            m = np.stack([means[r] for r in rows]).reshape(len(rows), 1, -1)  # type: ignore[misc]
            if frame.matrix is not None:  # every face has a (D,) embedding: the frame's rows, stacked
                e = frame.matrix.reshape(1, len(cols), -1)
            else:
                e = np.stack([frame.embeddings[c] for c in cols]).reshape(1, len(cols), -1)  # type: ignore[misc]
            # ``vecdot`` takes each pair's dot product as ``np.dot`` of the two vectors would (a
            # matrix product sums in another order and differs in the last bits).
            if len(rows) == len(means) and len(cols) == len(frame.embeddings):
                cos[:] = np.vecdot(m, e)
                has_cos[:] = True
            else:
                cos[np.ix_(rows, cols)] = np.vecdot(m, e)
                has_cos[np.ix_(rows, cols)] = True
        admissible = (iou >= cfg.iou_threshold) | (has_cos & (cos >= cfg.embedding_threshold))
        score = iou + cfg.embedding_weight * np.where(has_cos, cos, 0.0)
        return score, admissible

    def _overlaps_few(self, frame_index: int, frame: FrameArrays) -> list[list[float]]:
        """:meth:`_scores`' overlaps of every predicted track box with every face, in plain floats."""
        live = self._live
        boxes = frame.boxes.tolist()
        out = []
        for last, (v0, v1), (t0, t1, t2, t3) in zip(
            live.last.tolist(), live.velocity.tolist(), live.box.tolist(), strict=True
        ):
            dt = float(frame_index - last)
            s0, s1 = v0 * dt, v1 * dt
            predicted = (t0 + s0, t1 + s1, t2 + s0, t3 + s1)
            out.append([iou_pair(predicted, b) for b in boxes])
        return out

    def _admissible_one(self, frame_index: int, frame: FrameArrays) -> bool:
        """:meth:`_scores`' admissibility of the only track and the only face: the same float64
        arithmetic in plain floats, without numpy's per-call overhead."""
        cfg = self.config
        live = self._live
        dt = float(frame_index - int(live.last[0]))
        v0, v1 = (float(v) * dt for v in live.velocity[0])
        t0, t1, t2, t3 = (float(v) for v in live.box[0])
        if iou_pair((t0 + v0, t1 + v1, t2 + v0, t3 + v1), frame.boxes[0].tolist()) >= cfg.iou_threshold:
            return True
        total, emb = live.emb_sum[0], frame.embeddings[0]
        if total is None or live.emb_count[0] == 0 or emb is None or emb.shape != total.shape:
            return False
        norm = float(np.linalg.norm(total))
        return norm > 0 and float(np.dot(total / norm, emb)) >= cfg.embedding_threshold

    def _extend(self, frame_index: int, frame: FrameArrays, pairs: Sequence[tuple[int, int]]) -> None:
        """Move the tracks of ``pairs`` (track row, face) to their faces of this frame."""
        live = self._live
        if len(pairs) <= _FEW_PAIRS:
            self._extend_few(frame_index, frame, pairs)
        else:
            rows = np.array([r for r, _ in pairs], dtype=np.intp)
            cols = np.array([c for _, c in pairs], dtype=np.intp)
            box = frame.boxes[cols]
            old = live.box[rows]
            dt = (frame_index - live.last[rows]).astype(np.float64)
            inst = ((box[:, :2] + box[:, 2:]) - (old[:, :2] + old[:, 2:])) / (2.0 * dt)[:, None]
            blend = self._VELOCITY_BLEND * live.velocity[rows] + (1.0 - self._VELOCITY_BLEND) * inst
            live.velocity[rows] = np.where((live.hits[rows] == 1)[:, None], inst, blend)
            live.box[rows] = box
            live.landmarks[rows] = frame.landmarks[cols]
            live.last[rows] = frame_index
            live.hits[rows] += 1
        for r, c in pairs:
            emb = frame.embeddings[c]
            if emb is None:
                continue
            total = live.emb_sum[r]
            if total is None:
                live.emb_sum[r] = emb.copy()
            elif total.shape == emb.shape:
                live.emb_sum[r] = total + emb
            live.emb_count[r] += 1
            live.mean_by_id.pop(int(live.ids[r]), None)

    def _extend_few(self, frame_index: int, frame: FrameArrays, pairs: Sequence[tuple[int, int]]) -> None:
        """:meth:`_extend`'s box, velocity and counters for a few pairs, one pair at a time in
        plain floats: the same float64 arithmetic, without numpy's per-call overhead."""
        live = self._live
        keep = self._VELOCITY_BLEND
        take = 1.0 - keep
        boxes, old_boxes = frame.boxes.tolist(), live.box.tolist()
        last, hits, velocity = live.last.tolist(), live.hits.tolist(), live.velocity.tolist()
        for r, c in pairs:
            b0, b1, b2, b3 = boxes[c]
            o0, o1, o2, o3 = old_boxes[r]
            step = 2.0 * float(frame_index - last[r])
            i0, i1 = ((b0 + b2) - (o0 + o2)) / step, ((b1 + b3) - (o1 + o3)) / step
            if hits[r] == 1:
                live.velocity[r] = (i0, i1)
            else:
                v0, v1 = velocity[r]
                live.velocity[r] = (keep * v0 + take * i0, keep * v1 + take * i1)
            live.box[r] = boxes[c]
            live.landmarks[r] = frame.landmarks[c]
            live.last[r] = frame_index
            live.hits[r] = hits[r] + 1

    def _start(self, frame_index: int, frame: FrameArrays, cols: list[int]) -> list[int]:
        """New tracks for the faces ``cols`` (in that order); returns their ids."""
        live = self._live
        first = self._next_track_id
        self._next_track_id += len(cols)
        new_ids = list(range(first, self._next_track_id))
        picked = np.array(cols, dtype=np.intp)
        k = len(cols)
        live.ids = np.concatenate([live.ids, np.array(new_ids, dtype=np.int64)])
        live.last = np.concatenate([live.last, np.full(k, frame_index, dtype=np.int64)])
        live.box = np.concatenate([live.box, frame.boxes[picked]])
        live.velocity = np.concatenate([live.velocity, np.zeros((k, 2), dtype=np.float64)])
        live.landmarks = np.concatenate([live.landmarks, frame.landmarks[picked]])
        live.hits = np.concatenate([live.hits, np.ones(k, dtype=np.int64)])
        for c in cols:
            emb = frame.embeddings[c]
            live.emb_sum.append(None if emb is None else emb.copy())
            live.emb_count.append(0 if emb is None else 1)
        return new_ids


def track_chunk(
    faces_per_frame: Sequence[Sequence[Face]],
    first_frame: int,
    config: TrackingConfig,
    state_in: TrackerState | None,
) -> tuple[list[list[int]], TrackerState]:
    """Track one chunk (frames ``first_frame ...``) starting from ``state_in``.

    Returns the track id of every face, per frame, and the state to hand to
    the next chunk.  Chaining chunks in order gives exactly the ids of one pass.
    The chunk's detections are turned into arrays once, then each frame is one
    array step over all live tracks.
    """
    tracker = Tracker(config, state_in)
    frames = chunk_arrays(faces_per_frame)
    ids = [tracker._step(first_frame + i, frame) for i, frame in enumerate(frames)]
    return ids, tracker.state()
