"""A stop signal stays a stop, wherever it lands in the driver (``jobs.cli.stopped_by``, used by ``jobs.render``)."""

from __future__ import annotations

import pytest

from jobs.cli import stopped_by


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
