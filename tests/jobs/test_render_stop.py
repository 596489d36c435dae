"""A stop signal stays a stop, wherever it lands in the driver (``jobs.cli.stopped_by``, used by ``jobs.render``),
and a stop whose clean-up never ends is bounded by its deadline (``jobs.render.Stops``)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

from jobs.cli import stopped_by
from tests.raytools import REPO


def _import_interrupted() -> None:
    """What the log of an interrupted import showed: ImportError caused by Ray's sys.exit(15)."""
    try:
        raise SystemExit(15)  # Ray's SIGTERM handler
    except SystemExit as stop:
        raise ImportError("initialization failed") from stop


def test_a_stop_inside_an_import_is_found() -> None:
    with pytest.raises(ImportError) as caught:
        _import_interrupted()
    stop = stopped_by(caught.value)
    assert isinstance(stop, SystemExit) and stop.code == 15


def test_a_stop_found_through_the_implicit_context_too() -> None:
    try:
        try:
            raise SystemExit(143)
        except SystemExit:
            raise RuntimeError("while stopping")  # the implicit context (__context__) is the point
    except RuntimeError as exc:
        stop = stopped_by(exc)
    assert stop is not None and stop.code == 143


def test_an_ordinary_failure_is_not_a_stop() -> None:
    try:
        try:
            raise ValueError("bad frame")
        except ValueError as first:
            raise RuntimeError("chunk failed") from first
    except RuntimeError as exc:
        assert stopped_by(exc) is None


STUCK_AFTER_A_STOP = """
import os, signal, sys, time
from jobs.render import Stops

stops = Stops(deadline_seconds=1.0, release=lambda: open(sys.argv[1], "w").close())
stops.install()
stops.watch()
try:
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(600)
finally:
    time.sleep(600)  # a clean-up that never ends
"""


def test_a_stop_whose_clean_up_never_ends_leaves_by_its_deadline(tmp_path) -> None:
    """The stop's deadline (no Ray here; the real driver's is ``test_lease_jobs``): where each thread was,
    the lease given back, the stop's status, in about the deadline instead of the 600 s of the clean-up."""
    released = tmp_path / "released"
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", STUCK_AFTER_A_STOP, str(released)],
        cwd=REPO, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 128 + signal.SIGTERM, done.stderr
    assert time.monotonic() - started < 30
    assert "still not out 1 s later" in done.stderr and "Current thread" in done.stderr, done.stderr
    assert released.exists()


@pytest.mark.parametrize("value", ["0", "-5", "nan"])
def test_a_stop_deadline_that_is_not_a_positive_time_is_refused(value, capsys, no_ray) -> None:
    from jobs.render import main

    with pytest.raises(SystemExit) as exited:
        main(["job.yaml", "--stop-deadline", value])
    assert exited.value.code == 2
    assert f"--stop-deadline {float(value)}: must be a number of seconds above 0" in capsys.readouterr().err
