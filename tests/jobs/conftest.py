"""The entrypoint tests' destination: a folder no refused job may touch."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.jobs.refusals import KEEP


@pytest.fixture()
def dest(tmp_path: Path) -> Path:
    """The destination folder, holding one file of someone else's (:data:`tests.jobs.refusals.KEEP`)."""
    folder = tmp_path / "dest"
    folder.mkdir()
    (folder / "keep.mp4").write_bytes(KEEP)
    return folder
