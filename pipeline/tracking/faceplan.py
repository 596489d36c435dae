"""Per-shot face plan: identity per track, gap bridging, smoothing -> per-frame FaceTasks.

Runs on the driver after :mod:`pipeline.tracking.tracker` has given every detection a
track id (see that module's docstring for the whole design).  Because it sees
the whole shot at once, each track's identity is decided once from all of its
embeddings (a face never switches source mid-shot), and the smoother may be
non-causal.  The render actors then take ``plan.for_range(start, end)`` for
their chunk and need no state, so chunk seams cannot show.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from pipeline.errors import SpecError
from pipeline.geometry.types import Face, FaceTask
from pipeline.tracking.smoothing import OneEuro, interpolate_gaps, smooth_tracks
from pipeline.tracking.tracker import TrackingConfig, TrackObservation

if TYPE_CHECKING:  # the selection config lives with the face stages
    from pipeline.faces.config import SelectionConfig

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class TrackSummary:
    """What the plan decided for one track of the shot (frame indices are shot-relative)."""

    first_frame: int
    last_frame: int
    identity: str | None  # source identity rendered onto this track; None = left untouched
    similarity: float | None  # cosine to the matched reference (mode "reference"), else None
    detections: int = 0  # frames where the face was actually detected
    mean_area: float = 0.0  # mean detected box area, pixels
    parts: tuple[int, ...] = ()  # tracker ids stitched into this track (the first is its id)

    def to_dict(self) -> dict[str, Any]:
        return {
            "parts": list(self.parts),
            "first_frame": self.first_frame,
            "last_frame": self.last_frame,
            "identity": self.identity,
            "similarity": self.similarity,
            "detections": self.detections,
            "mean_area": self.mean_area,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> TrackSummary:
        return cls(
            first_frame=int(d["first_frame"]),
            last_frame=int(d["last_frame"]),
            identity=d["identity"],
            similarity=None if d["similarity"] is None else float(d["similarity"]),
            detections=int(d["detections"]),
            mean_area=float(d["mean_area"]),
            parts=tuple(int(p) for p in d["parts"]),
        )


def _task_to_dict(task: FaceTask) -> dict[str, Any]:
    return {
        "track_id": task.track_id,
        "identity": task.identity,
        "box": np.asarray(task.box, np.float32).tolist(),
        "landmarks": np.asarray(task.landmarks, np.float32).tolist(),
        "extra": dict(task.extra),
    }


def _task_from_dict(d: Mapping[str, Any]) -> FaceTask:
    return FaceTask(
        track_id=int(d["track_id"]),
        identity=str(d["identity"]),
        box=np.asarray(d["box"], dtype=np.float32).reshape(4),
        landmarks=np.asarray(d["landmarks"], dtype=np.float32).reshape(5, 2),
        extra=dict(d["extra"]),
    )


@dataclass(frozen=True)
class ShotFacePlan:
    """The faces to render in every frame of a shot, decided once for the whole shot."""

    tasks: list[list[FaceTask]]  # per shot frame, sorted by track id
    tracks: dict[int, TrackSummary]
    kept: tuple[tuple[int, int, int], ...] = ()
    """``(track, start, end)``: frames ``[start, end)`` where a fix keeps that track's plate face
    (:mod:`pipeline.tracking.fixes`): left as the plate on purpose, not a coverage gap."""

    def is_kept(self, track: int, frame: int) -> bool:
        """True when a fix keeps ``track``'s plate face on ``frame``."""
        return any(t == track and start <= frame < end for t, start, end in self.kept)

    @property
    def num_frames(self) -> int:
        return len(self.tasks)

    def for_range(self, start: int, end: int) -> list[list[FaceTask]]:
        """Tasks of shot frames ``[start, end)``: what one render chunk needs."""
        if not 0 <= start <= end <= len(self.tasks):
            raise ValueError(f"for_range({start}, {end}) is outside the shot's {len(self.tasks)} frames")
        return [list(t) for t in self.tasks[start:end]]

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form; ``from_dict`` restores it exactly (float32 round-trips)."""
        out: dict[str, Any] = {
            "tasks": [[_task_to_dict(t) for t in frame] for frame in self.tasks],
            "tracks": {str(k): v.to_dict() for k, v in sorted(self.tracks.items())},
        }
        if self.kept:
            out["kept"] = [list(k) for k in self.kept]
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ShotFacePlan:
        return cls(
            tasks=[[_task_from_dict(t) for t in frame] for frame in d["tasks"]],
            tracks={int(k): TrackSummary.from_dict(v) for k, v in d["tracks"].items()},
            kept=tuple((int(t), int(a), int(b)) for t, a, b in d.get("kept", ())),
        )


def group_tracks(
    faces_per_frame: Sequence[Sequence[Face]], track_ids: Sequence[Sequence[int]]
) -> dict[int, list[TrackObservation]]:
    """Regroup per-frame detections and their track ids into per-track observation lists."""
    if len(faces_per_frame) != len(track_ids):
        raise ValueError(f"{len(faces_per_frame)} frames of faces but {len(track_ids)} frames of track ids")
    tracks: dict[int, list[TrackObservation]] = {}
    for t, (faces, ids) in enumerate(zip(faces_per_frame, track_ids)):
        if len(faces) != len(ids):
            raise ValueError(f"frame {t}: {len(faces)} faces but {len(ids)} track ids")
        if len(set(ids)) != len(ids):
            raise ValueError(f"frame {t}: a track id appears twice ({list(ids)})")
        for face, tid in zip(faces, ids):
            tracks.setdefault(int(tid), []).append(
                TrackObservation(
                    frame_index=t,
                    track_id=int(tid),
                    box=np.asarray(face.box, np.float32),
                    landmarks=np.asarray(face.landmarks, np.float32),
                    score=float(face.score),
                    embedding=None if face.embedding is None else np.asarray(face.embedding, np.float32),
                )
            )
    return tracks


def _mean_embedding(obs: Sequence[TrackObservation]) -> np.ndarray | None:
    embs = [o.embedding for o in obs if o.embedding is not None]
    if not embs:
        return None
    mean = np.mean(np.stack(embs).astype(np.float64), axis=0)
    norm = float(np.linalg.norm(mean))
    return mean / norm if norm > 0 else None


def _decide_identities(
    tracks: Mapping[int, Sequence[TrackObservation]],
    selection: SelectionConfig,
    identities_embeddings: Mapping[str, np.ndarray],
) -> dict[int, tuple[str | None, float | None]]:
    """Source identity (or None) and reference similarity for every eligible track."""
    mode = selection.mode
    if mode in ("all", "largest"):
        if not selection.source:
            raise SpecError("selection.source", f"mode {mode!r} needs a source identity")
        if mode == "all":
            return {tid: (selection.source, None) for tid in tracks}
        areas = {tid: float(np.mean([_area(o.box) for o in obs])) for tid, obs in tracks.items()}
        # Ties go to the earliest track so the choice is deterministic.
        largest = max(sorted(areas), key=lambda tid: areas[tid]) if areas else None
        return {tid: (selection.source if tid == largest else None, None) for tid in tracks}
    if mode == "reference":
        refs: list[tuple[str, str, np.ndarray]] = []
        for ref_name, source in sorted(selection.references.items()):
            if ref_name not in identities_embeddings:
                raise SpecError(
                    f"selection.references.{ref_name}", "no embedding given for this reference identity"
                )
            emb = np.asarray(identities_embeddings[ref_name], np.float64).reshape(-1)
            refs.append((ref_name, source, emb / max(float(np.linalg.norm(emb)), 1e-12)))
        best: dict[int, float | None] = {}
        candidates: list[tuple[float, int, str, str]] = []
        for tid, obs in tracks.items():
            mean = _mean_embedding(obs)
            sims: list[float] = []
            for ref_name, source, emb in refs if mean is not None else []:
                assert mean is not None
                if emb.shape != mean.shape:
                    raise SpecError(
                        f"selection.references.{ref_name}",
                        f"reference embedding has {emb.shape[0]} dims, the shot's faces {mean.shape[0]}",
                    )
                sim = float(np.dot(mean, emb))
                sims.append(sim)
                if sim >= selection.threshold:
                    candidates.append((-sim, tid, ref_name, source))
            best[tid] = max(sims) if sims else None
        # Like the per-frame selector, a reference goes to at most one face at a time:
        # most similar pairs first; a track that loses its best reference to a track
        # on screen at the same time may still take its next one.  Tracks that do not
        # overlap in time (the same person leaving and coming back) may share one.
        spans = {tid: (obs[0].frame_index, obs[-1].frame_index) for tid, obs in tracks.items()}
        held: dict[str, list[tuple[int, int]]] = {}
        out: dict[int, tuple[str | None, float | None]] = {}
        for neg_sim, tid, ref_name, source in sorted(candidates):
            if tid in out:
                continue
            a0, a1 = spans[tid]
            if any(a0 <= b1 and b0 <= a1 for b0, b1 in held.get(ref_name, [])):
                continue
            held.setdefault(ref_name, []).append(spans[tid])
            out[tid] = (source, -neg_sim)
        for tid in tracks:
            out.setdefault(tid, (None, best[tid]))
        return out
    raise SpecError("selection.mode", f"unknown mode {mode!r}")


def _area(box: np.ndarray) -> float:
    x1, y1, x2, y2 = (float(v) for v in box)
    return max(0.0, x2 - x1) * max(0.0, y2 - y1)


def _areas(boxes: np.ndarray) -> np.ndarray:
    """:func:`_area` of every (4,) row of ``boxes``, float64: the same arithmetic (``max(0.0, w)``
    is ``w`` only where ``w > 0.0``), without a Python call per face."""
    b = boxes.astype(np.float64)
    w, h = b[:, 2] - b[:, 0], b[:, 3] - b[:, 1]
    return np.where(w > 0.0, w, 0.0) * np.where(h > 0.0, h, 0.0)


def _segments(frames: np.ndarray, max_gap: int) -> list[slice]:
    """Split a track's observation indices where a gap is longer than ``max_gap`` missed frames."""
    cuts = np.nonzero(np.diff(frames) - 1 > max_gap)[0] + 1
    bounds = [0, *cuts.tolist(), len(frames)]
    return [slice(a, b) for a, b in itertools.pairwise(bounds)]


def stitch_tracks(
    tracks: Mapping[int, Sequence[TrackObservation]], config: TrackingConfig
) -> dict[int, list[int]]:
    """Join tracks that are one face lost for a moment: stitched id -> tracker ids, in time order.

    A track may continue the chain of one that ended at most ``max_gap_frames``
    before it started, when the cosine between their mean embeddings reaches
    ``stitch_threshold`` (best match first, ties to the lower id).  Chains never
    overlap in time, so a stitched track still has at most one face per frame.
    Works on the whole shot, so chunking cannot change the result.
    """
    order = sorted(tracks, key=lambda tid: (tracks[tid][0].frame_index, tid))
    chains: dict[int, list[int]] = {}
    last: dict[int, int] = {}
    emb_sum: dict[int, np.ndarray | None] = {}
    for tid in order:
        obs = tracks[tid]
        first = obs[0].frame_index
        mean = _mean_embedding(obs)
        best: tuple[float, int] | None = None
        if mean is not None:
            for root in sorted(chains):
                gap = first - last[root] - 1
                chain_emb = emb_sum[root]
                if gap < 0 or gap > config.max_gap_frames or chain_emb is None:
                    continue
                if chain_emb.shape != mean.shape:
                    continue
                sim = float(np.dot(chain_emb / max(float(np.linalg.norm(chain_emb)), 1e-12), mean))
                if sim >= config.stitch_threshold and (best is None or sim > best[0]):
                    best = (sim, root)
        embs = [o.embedding.astype(np.float64) for o in obs if o.embedding is not None]
        own_sum = np.sum(embs, axis=0) if embs else None
        if best is None:
            chains[tid], last[tid], emb_sum[tid] = [tid], obs[-1].frame_index, own_sum
            continue
        root = best[1]
        logger.debug("track %d continues track %d (cosine %.3f)", tid, root, best[0])
        chains[root].append(tid)
        last[root] = obs[-1].frame_index
        prev = emb_sum[root]
        emb_sum[root] = own_sum if prev is None else (prev if own_sum is None else prev + own_sum)
    return chains


def _hidden(box: np.ndarray, others: Sequence[Face], min_overlap: float) -> bool:
    """True when ``box`` is covered by at least ``min_overlap`` of its area by one of ``others``."""
    area = _area(box)
    if area <= 0:
        return True
    for face in others:
        ix = min(float(box[2]), float(face.box[2])) - max(float(box[0]), float(face.box[0]))
        iy = min(float(box[3]), float(face.box[3])) - max(float(box[1]), float(face.box[1]))
        if ix > 0 and iy > 0 and ix * iy / area >= min_overlap:
            return True
    return False


@dataclass(frozen=True)
class _Segment:
    """A gap-free stretch of one planned track: dense frames, values (10 landmark + 4 box coordinates)."""

    track_id: int
    identity: str | None
    undecided: bool
    frames: np.ndarray  # (M,) shot frames
    values: np.ndarray  # (M, 14) float64
    interpolated: np.ndarray  # (M,) bool
    scale: float


def plan_shot(
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
    segments: list[_Segment] = []
    for tid in sorted(tracks):
        obs = tracks[tid]
        identity, similarity = decisions.get(tid, (None, None))
        areas = _areas(np.stack([o.box for o in obs]))
        summaries[tid] = TrackSummary(
            first_frame=obs[0].frame_index,
            last_frame=obs[-1].frame_index,
            identity=identity,
            similarity=similarity,
            detections=len(obs),
            mean_area=float(np.mean(areas)),
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
        scale = float(np.median(np.sqrt(np.where(areas > 1.0, areas, 1.0))))  # max(area, 1.0) per face
        for part in _segments(frames, config.max_gap_frames):
            dense_frames, dense, interpolated = interpolate_gaps(frames[part], values[part])
            segments.append(_Segment(tid, identity, undecided, dense_frames, dense, interpolated, scale))
    if config.smoothing:
        # Every segment of every track in one pass over time (bit-identical to one by one).
        smoothed = smooth_tracks(
            [(seg.values, times[seg.frames], seg.scale) for seg in segments],
            OneEuro(
                min_cutoff_hz=config.smoothing_min_cutoff_hz,
                beta=config.smoothing_beta,
                derivative_cutoff_hz=config.smoothing_derivative_cutoff_hz,
            ),
        )
        segments = [dataclasses.replace(seg, values=v) for seg, v in zip(segments, smoothed, strict=True)]
    for seg in segments:
        boxes = seg.values[:, 10:14].astype(np.float32)
        landmarks = seg.values[:, :10].reshape(-1, 5, 2).astype(np.float32)
        extra = {"undecided": True} if seg.undecided else {}
        for i, (f, interp) in enumerate(zip(seg.frames.tolist(), seg.interpolated.tolist(), strict=True)):
            box = boxes[i].copy()  # its own memory: a view would carry the whole track when pickled
            if interp and _hidden(box, faces_per_frame[f], config.occluded_overlap):
                continue  # behind another face: pasting here would cover the face in front
            tasks[f].append(
                FaceTask(
                    track_id=seg.track_id,
                    identity=seg.identity or "",
                    box=box,
                    landmarks=landmarks[i].copy(),
                    extra={"interpolated": bool(interp), **extra},
                )
            )
    for frame in tasks:
        frame.sort(key=lambda task: task.track_id)
    logger.debug("planned %d frames, %d tracks", n_frames, len(summaries))
    return ShotFacePlan(tasks=tasks, tracks=summaries)
