"""The video tests' named clips (:data:`tests.clips.CLIPS`), generated once per session."""

from __future__ import annotations

import pytest

from tests.clips import ClipCache


@pytest.fixture(scope="session")
def clips(tmp_path_factory: pytest.TempPathFactory) -> ClipCache:
    """Session-wide generated clips, each written on first use."""
    root = tmp_path_factory.getbasetemp() / "recast-video-clips"
    root.mkdir(exist_ok=True)
    return ClipCache(str(root))
