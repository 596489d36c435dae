"""The media every edit test cuts from, written once per session: EXR and DPX plates, a 30 fps movie."""

from __future__ import annotations

import os
from dataclasses import dataclass

import pytest

from tests.cluster.edit.cut_media import Plate, write_movie, write_plate


@dataclass(frozen=True)
class Media:
    root: str
    exr: Plate
    """A001C003: 24 EXR frames 1001-1024 at 01:00:00:00."""
    exr2: Plate
    """B002C004: 12 EXR frames 1001-1012 at 02:00:00:00."""
    dpx: Plate
    """C003C001: 12 DPX 10-bit log frames 1001-1012 at 03:00:00:00 (no colour space in the header)."""
    movie: str
    """M30.mp4: 90 frames at 30 fps, timecode 01:00:00:00."""
    source: str
    """An identity picture."""


@pytest.fixture(scope="session")
def media(tmp_path_factory: pytest.TempPathFactory) -> Media:
    from jobs.demo_media import write_source_image

    root = str(tmp_path_factory.mktemp("edit-media"))
    return Media(
        root=root,
        exr=write_plate(root, "A001C003"),
        exr2=write_plate(root, "B002C004", count=12, timecode="02:00:00:00"),
        dpx=write_plate(root, "C003C001", fmt="dpx", count=12, timecode="03:00:00:00"),
        movie=write_movie(os.path.join(root, "M30.mp4")),
        source=write_source_image(os.path.join(root, "source.jpg")),
    )
