"""The ``recast`` command the package installs (``[project.scripts]``): one name for every
entrypoint, each with its module's own arguments and exit status (issue 44)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

from jobs.command import COMMANDS

RECAST = Path(sys.executable).parent / "recast"
"""Installed beside the interpreter by ``pip install -e .`` (``infra/bootstrap.sh``)."""


def _run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(RECAST), *args], capture_output=True, text=True, timeout=120, cwd=cwd, check=False
    )


def test_recast_is_installed_and_lists_its_commands(no_ray) -> None:
    assert RECAST.is_file(), f"{RECAST}: the set-up installs the recast command (pip install -e .)"
    done = _run("--help")
    assert done.returncode == 0, done.stderr
    for name in COMMANDS:
        assert f"  {name} " in done.stdout, done.stdout
    unknown = _run("rendre", "spec.yaml")
    assert unknown.returncode == 2 and "no command 'rendre'" in unknown.stderr


def test_recast_render_is_jobs_render(tmp_path: Path, no_ray) -> None:
    """A spec with a bad field: refused before Ray, exit 2 naming it, as ``python -m jobs.render`` does."""
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        yaml.safe_dump(
            {
                "job_id": "cmd",
                "shots": [{"name": "a", "url": str(tmp_path / "a.mp4")}],
                "identities": {"hero": {"images": [str(tmp_path / "hero.jpg")]}},
                "output": {"url": str(tmp_path / "out" / "{shot}.mp4"), "quality": 99},
            }
        )
    )
    via_recast = _run("render", str(spec))
    via_module = subprocess.run(
        [sys.executable, "-m", "jobs.render", str(spec)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert via_recast.returncode == via_module.returncode == 2, via_recast.stderr
    assert "output.quality" in via_recast.stderr
    assert via_recast.stderr.splitlines()[-1] == via_module.stderr.splitlines()[-1]
    assert not (tmp_path / "out").exists()
