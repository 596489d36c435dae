"""Running ``jobs.render.main`` on a spec the way a user would, and checking a refused job left the
destination as it was: the tests of bad, bounded, sparse and untrusted inputs share these.

The destination folder (the ``dest`` fixture, ``tests/jobs/conftest.py``) holds one file of
someone else's, :data:`KEEP`, that no refused job may touch.
"""

from __future__ import annotations

from pathlib import Path

import ray
import yaml

from jobs.render import main
from tests.faultjobs import tmp_files

KEEP = b"an editor's file that must not change"


def run_main(tmp_path: Path, spec: dict | str, *args: str) -> int:
    """``jobs.render.main`` on ``spec`` written to ``tmp_path/job.yaml``; its exit code."""
    spec_path = tmp_path / "job.yaml"
    spec_path.write_text(spec if isinstance(spec, str) else yaml.safe_dump(spec))
    return main([str(spec_path), *args])


def snapshot(folder: Path) -> dict[str, tuple[int, bytes]]:
    return {
        str(p.relative_to(folder)): (p.stat().st_size, p.read_bytes()[:64])
        for p in folder.rglob("*")
        if p.is_file() and ".recast-work" not in p.parts
    }


def assert_untouched(dest: Path, before: dict) -> None:
    assert snapshot(dest) == before
    assert (dest / "keep.mp4").read_bytes() == KEEP
    assert not tmp_files(str(dest))


def refused(dest: Path, capsys, *words: str) -> str:
    """The job was refused before Ray naming ``words``, and ``dest`` holds only :data:`KEEP`."""
    err = capsys.readouterr().err
    for word in words:
        assert word in err, err
    assert not ray.is_initialized()
    assert sorted(p.name for p in dest.iterdir()) == ["keep.mp4"]
    assert (dest / "keep.mp4").read_bytes() == KEEP and not tmp_files(str(dest))
    return err
