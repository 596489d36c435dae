"""Synthetic face sequences for tracking tests: multi-face, crossing, still-with-noise, gaps.

Each generator returns per-frame ``list[Face]`` (what the analysis stage would
produce: box, five landmarks, score, L2-normalised embedding) together with the
ground truth (which person each detection is, noise-free landmarks).  Detection
order inside a frame is shuffled, because a detector gives no order guarantee.
Everything is seeded, so a test sees the same data on every run.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from pipeline.faces.config import SelectionConfig
from pipeline.geometry.types import Face, FaceTask
from pipeline.tracking.faceplan import plan_shot
from pipeline.tracking.tracker import TrackingConfig, track_chunk

# The ArcFace 5-point template at 112 px, as fractions of the crop (x, y).
_TEMPLATE = (
    np.array(
        [[38.2946, 51.6963], [73.5318, 51.5014], [56.0252, 71.7366], [41.5493, 92.3655], [70.7299, 92.2041]]
    )
    / 112.0
)
EMBEDDING_DIM = 512
TRACKING = TrackingConfig()
"""The tracking settings of a job that sets none."""


@dataclass
class SyntheticShot:
    """Faces per frame plus, for every face, the person it belongs to and its true landmarks."""

    faces: list[list[Face]]
    person: list[list[int]]  # per frame, per face: ground-truth person index
    truth_landmarks: list[list[np.ndarray]]  # per frame, per face: (5, 2) noise-free landmarks
    identities: list[np.ndarray]  # per person: the clean unit embedding

    def __len__(self) -> int:
        return len(self.faces)


def random_identity(rng: np.random.Generator, dim: int = EMBEDDING_DIM) -> np.ndarray:
    v = rng.standard_normal(dim)
    return (v / np.linalg.norm(v)).astype(np.float32)


def noisy_embedding(identity: np.ndarray, rng: np.random.Generator, noise: float) -> np.ndarray:
    """The identity seen through a recognizer.

    ``noise`` 0.03 gives cosine about 0.83 at 512-d to the clean identity (other people: about 0).
    """
    v = identity.astype(np.float64) + noise * rng.standard_normal(identity.shape)
    return (v / np.linalg.norm(v)).astype(np.float32)


def face_at(
    center: tuple[float, float],
    size: float,
    *,
    rng: np.random.Generator,
    noise_px: float = 0.0,
    identity: np.ndarray | None = None,
    embedding_noise: float = 0.03,
) -> tuple[Face, np.ndarray]:
    """A frontal face of ``size`` px centred at ``center``; returns the Face and its true landmarks."""
    cx, cy = center
    truth = np.stack([cx + (_TEMPLATE[:, 0] - 0.5) * size, cy + (_TEMPLATE[:, 1] - 0.5) * size], axis=1)
    landmarks = truth + noise_px * rng.standard_normal(truth.shape)
    box_noise = noise_px * rng.standard_normal(4)
    box = np.array([cx - size / 2, cy - size / 2, cx + size / 2, cy + size / 2]) + box_noise
    emb = None if identity is None else noisy_embedding(identity, rng, embedding_noise)
    face = Face(box=box.astype(np.float32), landmarks=landmarks.astype(np.float32), score=0.9, embedding=emb)
    return face, truth.astype(np.float32)


Path = Callable[[int], tuple[float, float] | None]  # frame -> centre, or None when not detected


def shot_from_paths(
    paths: list[Path],
    n_frames: int,
    *,
    size: float = 80.0,
    noise_px: float = 0.0,
    seed: int = 0,
    with_embeddings: bool = True,
) -> SyntheticShot:
    """Build a shot where person ``i`` is detected at ``paths[i](t)`` (None = missed or absent)."""
    rng = np.random.default_rng(seed)
    identities = [random_identity(rng) for _ in paths]
    faces: list[list[Face]] = []
    person: list[list[int]] = []
    truth: list[list[np.ndarray]] = []
    for t in range(n_frames):
        frame: list[tuple[Face, int, np.ndarray]] = []
        for p, path in enumerate(paths):
            c = path(t)
            if c is None:
                continue
            face, lm = face_at(
                c, size, rng=rng, noise_px=noise_px, identity=identities[p] if with_embeddings else None
            )
            frame.append((face, p, lm))
        order = rng.permutation(len(frame))
        faces.append([frame[i][0] for i in order])
        person.append([frame[i][1] for i in order])
        truth.append([frame[i][2] for i in order])
    return SyntheticShot(faces, person, truth, identities)


def still_shot(
    n_frames: int = 90, *, noise_px: float = 1.5, size: float = 100.0, seed: int = 1
) -> SyntheticShot:
    """One still face with per-frame landmark and box noise (detector jitter)."""
    return shot_from_paths([lambda t: (160.0, 120.0)], n_frames, size=size, noise_px=noise_px, seed=seed)


def moving_shot(
    n_frames: int = 90,
    *,
    kind: str = "sine",
    speed_px: float = 3.0,
    period: float = 40.0,
    amplitude: float = 60.0,
    noise_px: float = 0.0,
    seed: int = 2,
) -> SyntheticShot:
    """One face in real motion: ``linear`` (``speed_px`` per frame) or ``sine`` (horizontal)."""
    if kind == "linear":
        path: Path = lambda t: (40.0 + speed_px * t, 120.0)
    elif kind == "sine":
        path = lambda t: (200.0 + amplitude * np.sin(2 * np.pi * t / period), 120.0)
    else:
        raise ValueError(kind)
    return shot_from_paths([path], n_frames, noise_px=noise_px, seed=seed)


def crossing_shot(
    n_frames: int = 60, *, hidden: tuple[int, ...] = (), seed: int = 3, noise_px: float = 1.0
) -> SyntheticShot:
    """Two faces crossing horizontally on the same line (boxes overlap fully mid-shot).

    Person 0 goes left to right, person 1 right to left; ``hidden`` frames miss
    person 1 (occluded behind person 0 at the crossing).
    """

    def left(t: int) -> tuple[float, float]:
        return (60.0 + 240.0 * t / (n_frames - 1), 120.0)

    def right(t: int) -> tuple[float, float] | None:
        return None if t in hidden else (300.0 - 240.0 * t / (n_frames - 1), 124.0)

    return shot_from_paths([left, right], n_frames, noise_px=noise_px, seed=seed)


def gap_shot(
    n_frames: int = 60, *, hidden: range = range(20, 24), leaves_at: int | None = None, seed: int = 4
) -> SyntheticShot:
    """A slowly moving face missed on ``hidden`` frames; optionally gone for good from ``leaves_at``."""

    def path(t: int) -> tuple[float, float] | None:
        if t in hidden or (leaves_at is not None and t >= leaves_at):
            return None
        return (100.0 + 1.5 * t, 120.0)

    return shot_from_paths([path], n_frames, noise_px=0.5, seed=seed)


def multi_face_shot(n_frames: int = 120, *, seed: int = 5) -> SyntheticShot:
    """Three people: one still throughout, one walking across and leaving, one entering late with a miss."""

    def still(t: int) -> tuple[float, float]:
        return (80.0, 100.0)

    def walker(t: int) -> tuple[float, float] | None:
        return None if t >= 90 else (150.0 + 3.0 * t, 200.0)

    def late(t: int) -> tuple[float, float] | None:
        if t < 30 or t in (61, 62, 63):
            return None
        return (400.0 - 1.0 * t, 80.0 + 20.0 * np.sin(t / 10.0))

    return shot_from_paths([still, walker, late], n_frames, noise_px=1.0, seed=seed)


def crowd_shot(
    n_frames: int = 720, *, n_people: int = 12, seed: int = 6, noise_px: float = 1.0
) -> SyntheticShot:
    """A crowd: ``n_people`` faces per frame on crossing paths, each missed now and then.

    Half walk left to right and half right to left on lines a few pixels apart
    (their boxes cross and overlap fully), at different speeds, bobbing up and
    down; every person is missed on a few short runs of frames (occluded), and
    some runs are longer than the tracker's gap, so tracks end and restart.
    """
    rng = np.random.default_rng(seed + 1000)
    width = 1920.0

    def person(p: int) -> Path:
        speed = float(rng.uniform(1.0, 4.0)) * (1.0 if p % 2 == 0 else -1.0)
        x0 = float(rng.uniform(0.0, width))
        y = 150.0 + 40.0 * (p // 4) + 3.0 * (p % 4)
        phase = float(rng.uniform(0.0, 2 * np.pi))
        misses: set[int] = set()
        for start in rng.integers(0, n_frames, size=max(1, n_frames // 60)).tolist():
            misses.update(range(start, start + int(rng.integers(1, 9))))

        def path(t: int) -> tuple[float, float] | None:
            if t in misses:
                return None
            x = (x0 + speed * t) % (width + 200.0) - 100.0
            return (x, y + 10.0 * np.sin(t / 15.0 + phase))

        return path

    return shot_from_paths([person(p) for p in range(n_people)], n_frames, noise_px=noise_px, seed=seed)


def chunk_bounds(n_frames: int, n_chunks: int) -> list[tuple[int, int]]:
    """Split ``[0, n_frames)`` into ``n_chunks`` contiguous ranges of nearly equal length."""
    edges = np.linspace(0, n_frames, n_chunks + 1).round().astype(int).tolist()
    return list(itertools.pairwise(edges))


def frame_times_for(frames: Sequence[object], rate: float = 24.0) -> tuple[float, ...]:
    """Seconds of each frame of a constant-rate shot (what ``VideoInfo.frame_times`` gives)."""
    return tuple(i / rate for i in range(len(frames)))


def selection(**kwargs: Any) -> SelectionConfig:
    """A ``SelectionConfig`` with the given fields (validated as a job spec would be)."""
    return SelectionConfig(**kwargs)


def mean_displacement(landmarks: np.ndarray) -> float:
    """Mean frame-to-frame displacement of the landmarks, pixels: (T, 5, 2) -> float."""
    return float(np.mean(np.linalg.norm(np.diff(landmarks, axis=0), axis=-1)))


def best_lag(smoothed: np.ndarray, reference: np.ndarray, max_lag: float = 3.0, margin: int = 8) -> float:
    """The shift d (frames, 0.05 steps) that best explains ``smoothed(t) ~ reference(t - d)``."""
    t_all = np.arange(len(reference), dtype=np.float64)
    t = t_all[margin:-margin]
    flat_ref = reference.reshape(len(reference), -1)
    flat_sm = smoothed.reshape(len(smoothed), -1)[margin:-margin]
    best_err, best_d = np.inf, 0.0
    for d in np.arange(-max_lag, max_lag + 1e-9, 0.05):
        shifted = np.stack(
            [np.interp(t - d, t_all, flat_ref[:, k]) for k in range(flat_ref.shape[1])], axis=1
        )
        err = float(np.mean((flat_sm - shifted) ** 2))
        if err < best_err:
            best_err, best_d = err, float(d)
    return best_d


def chunked_plan_from_faces(faces, n_chunks: int, sel, refs, config: TrackingConfig = TRACKING):
    """Track real per-frame faces chunk by chunk, then plan the shot (the driver's path)."""
    ids: list[list[int]] = []
    state = None
    for start, end in chunk_bounds(len(faces), n_chunks):
        chunk_ids, state = track_chunk(faces[start:end], start, config, state)
        ids.extend(chunk_ids)
    return plan_shot(faces, ids, sel, refs, config, frame_times=frame_times_for(faces))


def assert_tasks_identical(a: list[list[FaceTask]], b: list[list[FaceTask]]) -> None:
    """Two plans give every frame the same tasks: tracks, identities, landmarks, boxes, extras."""
    assert len(a) == len(b)
    for t, (fa, fb) in enumerate(zip(a, b)):
        assert [x.track_id for x in fa] == [x.track_id for x in fb], t
        assert [x.identity for x in fa] == [x.identity for x in fb], t
        for x, y in zip(fa, fb):
            assert np.array_equal(x.landmarks, y.landmarks), t
            assert np.array_equal(x.box, y.box), t
            assert x.extra == y.extra, t


def _figures() -> None:
    """Print jitter, lag and flicker before/after smoothing (``python -m tests.tracking_media``)."""
    import time

    import skimage.data

    from pipeline.faces.analyze import FaceAnalyzer
    from pipeline.faces.config import FaceConfig
    from pipeline.faces.identity import identity_from_images
    from pipeline.faces.renderers.cpu import FaceRenderer
    from pipeline.models.loader import load_face_models
    from pipeline.models.pack import load_pack
    from pipeline.models.runtime.settings import ExecutionConfig
    from pipeline.tracking.faceplan import plan_shot
    from pipeline.tracking.tracker import TrackingConfig, track_chunk
    from tests.faces_data import carphone_frames, still_noise_clip

    on, off = TrackingConfig(), TrackingConfig(smoothing=False)
    sel = selection(mode="all", source="anna")

    def plan(faces: list[list[Face]], config: TrackingConfig):
        ids = track_chunk(faces, 0, config, None)[0]
        return plan_shot(faces, ids, sel, {}, config, frame_times=frame_times_for(faces))

    def lms(tasks_or_faces) -> np.ndarray:
        return np.stack([f[0].landmarks for f in tasks_or_faces]).astype(np.float64)

    print("synthetic landmarks (mean frame-to-frame displacement, px; lag in frames vs truth)")
    for noise in (0.5, 1.5, 3.0):
        shot = still_shot(noise_px=noise)
        before, after = (
            mean_displacement(lms(plan(shot.faces, off).tasks)),
            mean_displacement(lms(plan(shot.faces, on).tasks)),
        )
        print(f"  still face 100 px, noise {noise} px: {before:.3f} -> {after:.3f} ({before / after:.1f}x)")
    for kind in ("linear", "sine"):
        shot = moving_shot(kind=kind, noise_px=1.0)
        truth = np.stack([f[0] for f in shot.truth_landmarks]).astype(np.float64)
        raw, sm = lms(shot.faces), lms(plan(shot.faces, on).tasks)
        print(
            f"  {kind} motion, noise 1 px: lag {best_lag(sm, truth):+.2f} frames (raw {best_lag(raw, truth):+.2f}),"
            f" mean error to truth {np.mean(np.abs(raw - truth)):.3f} -> {np.mean(np.abs(sm - truth)):.3f} px"
        )

    models = load_face_models(load_pack("builtin:default"), ExecutionConfig())
    analyzer = FaceAnalyzer(models)
    identities = {"anna": identity_from_images("anna", [("astronaut", skimage.data.astronaut())], models)}
    carphone = carphone_frames()
    print("real detections (YuNet + SFace, default pack)")
    for name, frames in (
        ("still face + pixel noise 8", still_noise_clip(60).frames),
        ("carphone 120 frames", carphone),
    ):
        t0 = time.perf_counter()
        faces = analyzer.analyze(frames)
        t_analyze = time.perf_counter() - t0
        t0 = time.perf_counter()
        p_on = plan(faces, on)
        t_plan = time.perf_counter() - t0
        p_off = plan(faces, off)
        before, after = mean_displacement(lms(p_off.tasks)), mean_displacement(lms(p_on.tasks))
        print(
            f"  {name}: landmark jitter {before:.3f} -> {after:.3f} px/frame ({before / after:.1f}x),"
            f" lag {best_lag(lms(p_on.tasks), lms(p_off.tasks)):+.2f} frames;"
            f" analyze {t_analyze:.2f} s, track+plan {t_plan * 1000:.1f} ms"
        )
        flick = []
        for p in (p_off, p_on):
            out = FaceRenderer(models, identities, FaceConfig()).render(frames, p.tasks)
            x1, y1, x2, y2 = (int(v) for v in np.round(np.mean([t[0].box for t in p.tasks], axis=0)))
            crops = np.stack([o[y1:y2, x1:x2].astype(np.float64) for o in out])
            flick.append(float(np.mean(np.abs(np.diff(crops, axis=0)))))
        print(f"  {name}: rendered face-box flicker {flick[0]:.2f} -> {flick[1]:.2f} grey levels/frame")


if __name__ == "__main__":
    _figures()
