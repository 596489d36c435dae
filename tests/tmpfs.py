"""A size-limited tmpfs for the tests of a full disk: mounted for a block, always unmounted after.

Mounting needs root (or CAP_SYS_ADMIN); where it is refused the test is skipped, saying why.  The
mount is undone however the block ends (a lazy ``umount -l`` when a plain one is refused, a process
still holding a file there), so no test leaves a mount behind.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, check=False)


@contextlib.contextmanager
def small_tmpfs(folder: Path, size: str) -> Iterator[Path]:
    """``folder`` (created) with a tmpfs of ``size`` (``mount``'s spelling: ``320k``, ``8m``) on it."""
    folder.mkdir(parents=True, exist_ok=True)
    try:
        done = _run("mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder))
        error = (done.stderr or done.stdout).strip() if done.returncode else ""
    except OSError as exc:  # no mount command at all
        error = str(exc)
    if error:
        pytest.skip(f"cannot mount a tmpfs here (needs root / CAP_SYS_ADMIN): {error}")
    try:
        yield folder
    finally:
        unmount(folder)


def resize(folder: Path, size: str) -> None:
    """Make the tmpfs on ``folder`` ``size`` large, keeping what it holds (space freed, or taken)."""
    done = _run("mount", "-o", f"remount,size={size}", str(folder))
    assert done.returncode == 0, f"remount of {folder} to {size}: {done.stderr.strip()}"


def unmount(folder: Path) -> None:
    """Unmount ``folder``; lazily (``umount -l``) when a plain unmount is refused."""
    if _run("umount", str(folder)).returncode != 0:
        _run("umount", "-l", str(folder))
    assert not os.path.ismount(folder), f"{folder} is still mounted"
