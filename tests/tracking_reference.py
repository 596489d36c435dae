"""The tracker and smoother as they were before they were vectorised (issue 33), kept as a reference.

Not a test module: :mod:`tests.pipeline.tracking.test_vectorised` runs these beside the
product's array versions and checks that track ids, tracker states and plans are
identical, bit for bit.  Copied verbatim (names prefixed ``reference_``); only the
data types (``ActiveTrack``, ``TrackerState``) and the unchanged planning helpers
come from the product.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
from scipy.optimize import linear_sum_assignment

from pipeline.geometry.boxes import box_iou
from pipeline.geometry.types import Face, FaceTask
from pipeline.tracking.faceplan import (
    ShotFacePlan,
    TrackSummary,
    _area,
    _decide_identities,
    _hidden,
    _segments,
    group_tracks,
    stitch_tracks,
)
from pipeline.tracking.smoothing import interpolate_gaps
from pipeline.tracking.tracker import ActiveTrack, TrackerState, TrackingConfig

if TYPE_CHECKING:
    from pipeline.faces.config import SelectionConfig


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


class ReferenceTracker:
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


def reference_track_chunk(
    faces_per_frame: Sequence[Sequence[Face]],
    first_frame: int,
    config: TrackingConfig,
    state_in: TrackerState | None,
) -> tuple[list[list[int]], TrackerState]:
    """Track one chunk (frames ``first_frame ...``) starting from ``state_in``.

    Returns the track id of every face, per frame, and the state to hand to
    the next chunk.  Chaining chunks in order gives exactly the ids of one pass.
    """
    tracker = ReferenceTracker(config, state_in)
    ids = [tracker.update(first_frame + i, faces) for i, faces in enumerate(faces_per_frame)]
    return ids, tracker.state()


def _alpha(cutoff_hz: float, dt: float) -> float:
    # Smoothing factor of a first-order low-pass at ``cutoff_hz`` over a step of ``dt`` seconds.
    tau = 1.0 / (2.0 * math.pi * cutoff_hz)
    return 1.0 / (1.0 + tau / dt)


def _steps(times: np.ndarray, n: int) -> np.ndarray:
    """Seconds between consecutive samples (n - 1,), checked to be increasing."""
    t = np.asarray(times, dtype=np.float64)
    if t.shape != (n,):
        raise ValueError(f"times {t.shape} do not match {n} samples")
    dt = np.diff(t)
    if np.any(dt <= 0):
        raise ValueError("times must be strictly increasing")
    return dt


def reference_one_euro(
    values: np.ndarray,
    times: np.ndarray,
    scale: float,
    *,
    min_cutoff_hz: float,
    beta: float,
    derivative_cutoff_hz: float,
) -> np.ndarray:
    """Causal One-Euro filter over a (T, K) series sampled at ``times`` (seconds, increasing).

    Cutoffs are in Hz and every step uses its real duration, so a shot at 24,
    25, 30 or 60 fps (or a variable frame rate) is smoothed the same in time.
    The speed driving the cutoff is the RMS over the K coordinates of the
    filtered rate of change, in ``scale`` units per second (e.g. face sizes,
    with ``scale`` the face size in pixels), so ``beta`` does not depend on
    resolution: cutoff = ``min_cutoff_hz + beta * speed``.
    """
    x = np.asarray(values, dtype=np.float64)
    out = np.empty_like(x)
    if len(x) == 0:
        return out
    dts = _steps(times, len(x))
    inv_scale = 1.0 / max(float(scale), 1e-9)
    prev = x[0].copy()
    d_prev = np.zeros(x.shape[1], dtype=np.float64)
    out[0] = prev
    for t in range(1, len(x)):
        dt = float(dts[t - 1])
        a_d = _alpha(derivative_cutoff_hz, dt)
        d = a_d * (x[t] - prev) / dt + (1.0 - a_d) * d_prev
        speed = math.sqrt(float(np.mean(d * d))) * inv_scale
        a = _alpha(min_cutoff_hz + beta * speed, dt)
        prev = a * x[t] + (1.0 - a) * prev
        d_prev = d
        out[t] = prev
    return out


def reference_smooth_track(
    values: np.ndarray,
    times: np.ndarray,
    scale: float,
    *,
    min_cutoff_hz: float,
    beta: float,
    derivative_cutoff_hz: float,
    pad_frames: int = 15,
) -> np.ndarray:
    """Zero-phase One-Euro smoothing of a dense (T, K) track series sampled at ``times``.

    The series is extended at both ends by odd reflection (``2*x[0] - x[k]``, and
    the same for the times), which continues a linear motion straight through the
    edge, so the first and last frames of a moving track are not pulled back;
    then filtered forward and backward.  Deterministic: the same input gives
    bit-identical output.
    """
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 2:
        raise ValueError(f"smooth_track: values must be (T, K), got {x.shape}")
    n = len(x)
    t = np.asarray(times, dtype=np.float64)
    _steps(t, n)
    if n < 3:
        return x.copy()
    p = min(pad_frames, n - 1)
    padded = np.concatenate([2.0 * x[0] - x[p:0:-1], x, 2.0 * x[-1] - x[-2 : -p - 2 : -1]])
    padded_t = np.concatenate([2.0 * t[0] - t[p:0:-1], t, 2.0 * t[-1] - t[-2 : -p - 2 : -1]])
    kw = {"min_cutoff_hz": min_cutoff_hz, "beta": beta, "derivative_cutoff_hz": derivative_cutoff_hz}
    fwd = reference_one_euro(padded, padded_t, scale, **kw)
    # Backward in time: the reversed series with negated times (increasing again, same steps).
    both = reference_one_euro(fwd[::-1], -padded_t[::-1], scale, **kw)[::-1]
    return both[p : p + n].copy()


def reference_plan_shot(
    faces_per_frame: Sequence[Sequence[Face]],
    track_ids: Sequence[Sequence[int]],
    selection: SelectionConfig,
    identities_embeddings: Mapping[str, np.ndarray],
    config: TrackingConfig,
    *,
    frame_times: Sequence[float],
    also_render: frozenset[int] = frozenset(),
) -> ShotFacePlan:
    """Decide what to render on every frame of a shot.

    ``faces_per_frame`` and ``track_ids`` cover the whole shot (frame 0 = the
    shot's first frame); ``identities_embeddings`` maps reference identity names
    to their embeddings (needed for ``selection.mode == "reference"``).
    Tracks that are one face lost for a moment are stitched (:func:`stitch_tracks`;
    the plan's track ids are the first tracker id of each chain).  Per track:
    identity from the mean of all its embeddings; missed frames up to
    ``config.max_gap_frames`` bridged by linear interpolation (tasks with
    ``extra["interpolated"] = True``), except where the bridged box is hidden
    behind another detected face; landmarks and box smoothed with a zero-phase
    One-Euro filter when ``config.smoothing``, in shot time: ``frame_times`` are
    every frame's seconds (:meth:`VideoInfo.frame_times`), so cutoffs are in Hz
    whatever the frame rate, and variable frame rates are filtered by real time.
    ``also_render``: tracks given tasks even when no identity is decided for them (identity ``""``,
    ``extra["undecided"]``), for a fix to give them one (:mod:`pipeline.tracking.fixes`).
    """
    if len(frame_times) != len(faces_per_frame):
        raise ValueError(f"plan_shot: {len(frame_times)} frame times for {len(faces_per_frame)} frames")
    times = np.asarray(frame_times, dtype=np.float64)
    raw_tracks = group_tracks(faces_per_frame, track_ids)
    chains = stitch_tracks(raw_tracks, config)
    tracks = {
        root: sorted((o for part in parts for o in raw_tracks[part]), key=lambda o: o.frame_index)
        for root, parts in chains.items()
    }
    eligible = {tid: obs for tid, obs in tracks.items() if len(obs) >= config.min_track_frames}
    decisions = _decide_identities(eligible, selection, identities_embeddings)

    n_frames = len(faces_per_frame)
    tasks: list[list[FaceTask]] = [[] for _ in range(n_frames)]
    summaries: dict[int, TrackSummary] = {}
    for tid in sorted(tracks):
        obs = tracks[tid]
        identity, similarity = decisions.get(tid, (None, None))
        summaries[tid] = TrackSummary(
            first_frame=obs[0].frame_index,
            last_frame=obs[-1].frame_index,
            identity=identity,
            similarity=similarity,
            detections=len(obs),
            mean_area=float(np.mean([_area(o.box) for o in obs])),
            parts=tuple(chains[tid]),
        )
        undecided = identity is None
        if undecided and tid not in also_render:
            continue
        frames = np.array([o.frame_index for o in obs], dtype=np.int64)
        values = np.concatenate(
            [np.stack([o.landmarks.reshape(-1) for o in obs]), np.stack([o.box for o in obs])], axis=1
        ).astype(np.float64)
        # Face size in pixels makes the smoother's speed threshold resolution independent.
        scale = float(np.median([np.sqrt(max(_area(o.box), 1.0)) for o in obs]))
        for seg in _segments(frames, config.max_gap_frames):
            dense_frames, dense, interpolated = interpolate_gaps(frames[seg], values[seg])
            if config.smoothing:
                dense = reference_smooth_track(
                    dense,
                    times[dense_frames],
                    scale,
                    min_cutoff_hz=config.smoothing_min_cutoff_hz,
                    beta=config.smoothing_beta,
                    derivative_cutoff_hz=config.smoothing_derivative_cutoff_hz,
                )
            boxes = dense[:, 10:14].astype(np.float32)
            landmarks = dense[:, :10].reshape(-1, 5, 2).astype(np.float32)
            for i, (f, interp) in enumerate(zip(dense_frames.tolist(), interpolated.tolist(), strict=True)):
                box = boxes[i].copy()  # its own memory: a view would carry the whole track when pickled
                if interp and _hidden(box, faces_per_frame[f], config.occluded_overlap):
                    continue  # behind another face: pasting here would cover the face in front
                tasks[f].append(
                    FaceTask(
                        track_id=tid,
                        identity=identity or "",
                        box=box,
                        landmarks=landmarks[i].copy(),
                        extra={"interpolated": bool(interp), **({"undecided": True} if undecided else {})},
                    )
                )
    for frame in tasks:
        frame.sort(key=lambda task: task.track_id)
    return ShotFacePlan(tasks=tasks, tracks=summaries)
