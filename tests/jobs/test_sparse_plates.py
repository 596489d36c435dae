"""Finding 4 of issue 29: a sparse image sequence is refused by naming its gaps, never by
materialising every number between its first and last frame.

Gaps come from neighbouring frame numbers, so two frames 99,999,998 apart cost one gap;
the message names at most a handful of gaps, then counts the rest."""

from __future__ import annotations

import shutil
import tracemalloc
from pathlib import Path

import pytest
import ray

from jobs.demo_media import write_source_image
from jobs.render import EXIT_BAD_INPUT
from pipeline.errors import MediaError
from pipeline.plates.probe import probe_sequence
from pipeline.plates.sequence import RUNS_SHOWN, gaps_in, runs_are
from tests.jobs.refusals import assert_untouched, run_main, snapshot
from tests.plates import write_frame


def sparse(folder: Path, numbers: list[int], *, name: str = "sc010_plate") -> str:
    """A sequence of one real EXR frame copied to each of ``numbers``; returns its ``####`` pattern."""
    folder.mkdir(parents=True, exist_ok=True)
    first = write_frame(str(folder / "first.exr"), size=(64, 36))
    for n in numbers:
        shutil.copyfile(first, folder / f"{name}.{n:04d}.exr")
    Path(first).unlink()
    return str(folder / f"{name}.####.exr")


def refused(tmp_path: Path, dest: Path, capsys, pattern: str) -> str:
    before = snapshot(dest)
    spec = {
        "job_id": "sparse",
        "shots": [{"url": pattern}],
        "identities": {"hero": {"images": [write_source_image(str(tmp_path / "source.jpg"))]}},
        "output": {"url": str(dest / "{shot}_recast.####.exr")},
    }
    code = run_main(tmp_path, spec)
    err = capsys.readouterr().err
    assert code == EXIT_BAD_INPUT, err
    assert pattern in err and "Traceback" not in err, err
    assert not ray.is_initialized()
    assert_untouched(dest, before)
    return err


@pytest.mark.timeout(60)
def test_two_frames_99999998_apart(tmp_path, dest, capsys, no_ray) -> None:
    """The audit's reproduction: frames 1 and 99999999 (a set of the range was 4.8 GB)."""
    err = refused(tmp_path, dest, capsys, sparse(tmp_path / "plates", [1, 99_999_999]))
    assert "frames 2-99999998 are missing" in err, err


@pytest.mark.timeout(60)
def test_many_gaps_are_counted_not_listed(tmp_path, dest, capsys, no_ray) -> None:
    numbers = [1001 + 3 * k for k in range(20)] + [50_000_000]  # 19 gaps of 2 frames, then a huge one
    err = refused(tmp_path, dest, capsys, sparse(tmp_path / "plates", numbers))
    assert "frames 1002-1003, 1005-1006, 1008-1009, 1011-1012, 1014-1015 and 15 more gaps" in err, err
    assert "49,998,979 frames in all are missing" in err, err  # 19 x 2 + (1059 to 49,999,999)
    assert "1062" not in err  # the sixth gap is counted, not named


@pytest.mark.timeout(60)
def test_negative_and_huge_frame_numbers(tmp_path, dest, capsys, no_ray) -> None:
    err = refused(tmp_path, dest, capsys, sparse(tmp_path / "plates", [-99_999_999, 0, 1, 2_000_000_000]))
    assert "frames -99999998--1, 2-1999999999 are missing" in err, err


def test_probe_memory_does_not_grow_with_the_gap(tmp_path) -> None:
    pattern = sparse(tmp_path, [1, 3_000_001])
    tracemalloc.start()
    try:
        with pytest.raises(MediaError, match="frames 2-3000000 are missing"):
            probe_sequence(pattern)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20, f"probing two frames used {peak:,} bytes"  # a set of the range: ~200 MB


def test_gaps_come_from_neighbours() -> None:
    assert gaps_in([1, 99_999_999]) == [(2, 99_999_998)]
    assert gaps_in([5, 6, 7]) == []
    assert gaps_in([-3, -1, 0, 4]) == [(-2, -2), (1, 3)]
    runs = [(n, n) for n in range(0, 2 * (RUNS_SHOWN + 3), 2)]
    text = runs_are(runs, "missing", noun="gaps")
    assert text == "frames 0, 2, 4, 6, 8 and 3 more gaps, 8 frames in all are missing"
    assert runs_are([(7, 7)], "missing") == "frame 7 is missing"
