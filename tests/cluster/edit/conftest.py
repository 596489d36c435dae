"""The media every edit test cuts from, written once per session: EXR and DPX plates, a 30 fps movie."""

from __future__ import annotations

import os

import pytest

from tests.cluster.edit.cut_media import Media, write_movie, write_plate


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
