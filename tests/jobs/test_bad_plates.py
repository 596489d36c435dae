"""Bad image-sequence plates through the real entrypoint: refused before Ray, frames named, nothing written.

Each case breaks a real EXR (or DPX) sequence the way plates arrive broken (a
missing frame, a frame of another size or channel set, a truncated or empty
file) or leaves out what the job cannot guess (the frame rate, the colour space),
and asserts the exit code, a message naming the shot and the frame numbers or
field, and a destination exactly as it was.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import ray

from jobs.demo_media import write_source_image
from jobs.render import EXIT_BAD_INPUT
from tests.jobs.refusals import assert_untouched, run_main, snapshot
from tests.plates import write_frame, write_sequence


def plate(root: Path, **kwargs) -> str:
    return write_sequence(root, "sc010_plate", count=12, first=1001, **kwargs)


def frame(pattern: str, number: int) -> str:
    return pattern.replace("####", f"{number:04d}")


def break_gap(p: str) -> None:
    os.remove(frame(p, 1004))
    os.remove(frame(p, 1005))


def break_size(p: str) -> None:
    write_frame(frame(p, 1007), 6, size=(160, 90))


def break_channels(p: str) -> None:
    write_frame(frame(p, 1003), 2, extra_channels=("A",))


def break_truncated(p: str) -> None:
    data = Path(frame(p, 1009)).read_bytes()
    Path(frame(p, 1009)).write_bytes(data[: len(data) // 2])


def break_empty(p: str) -> None:
    Path(frame(p, 1010)).write_bytes(b"")


@pytest.mark.parametrize(
    ("damage", "words"),
    [
        (break_gap, ["frames 1004-1005", "missing"]),
        (break_size, ["frame 1007", "160x90"]),
        (break_channels, ["frame 1003"]),
        (break_truncated, ["frame 1009", "truncated"]),
        (break_empty, ["frame 1010", "0 bytes"]),
    ],
    ids=["gap", "size", "channels", "truncated", "empty"],
)
def test_broken_sequence_is_refused(tmp_path, dest, capsys, damage, words, no_ray) -> None:
    pattern = plate(tmp_path / "plates")
    damage(pattern)
    before = snapshot(dest)
    code = run_main(tmp_path, _spec(tmp_path, pattern, dest))
    err = capsys.readouterr().err
    assert code == EXIT_BAD_INPUT, err
    for word in ["sc010_plate.####.exr", *words]:
        assert word in err, err
    assert not ray.is_initialized()
    assert_untouched(dest, before)


@pytest.mark.parametrize(
    ("edit", "words"),
    [
        ("no-fps", ["add fps: to the shot"]),
        ("no-colour", ["colour.plate", "does not name its colour space"]),
        ("bad-colour", ["colour.plate", "no colour space 'LogC9'"]),
        ("range", ["shots[0].frames", "has frames 1001-1012"]),
        ("video-out", ["output.url", "is an image sequence but its output"]),
    ],
)
def test_plate_settings_are_checked(tmp_path, dest, capsys, edit, words, no_ray) -> None:
    if edit == "no-fps":
        pattern = plate(tmp_path / "plates", fmt="tiff", pixel="uint16", compression="zip", colour_space=None)
    elif edit == "no-colour":
        pattern = plate(tmp_path / "plates", colour_space=None)
    else:
        pattern = plate(tmp_path / "plates")
    spec = _spec(tmp_path, pattern, dest)
    if edit == "bad-colour":
        spec["colour"] = {"plate": "LogC9"}
    elif edit == "range":
        spec["shots"][0]["frames"] = "990-1012"
    elif edit == "video-out":
        spec["output"] = {"url": str(dest / "{shot}.mov")}
    if edit == "no-fps":
        spec["output"] = {"url": str(dest / "{shot}.####.tif")}
    before = snapshot(dest)
    code = run_main(tmp_path, spec)
    err = capsys.readouterr().err
    assert code == EXIT_BAD_INPUT, err
    for word in words:
        assert word in err, err
    assert not ray.is_initialized()
    assert_untouched(dest, before)


def _spec(tmp_path: Path, pattern: str, folder: Path) -> dict:
    return {
        "job_id": "bad-plates",
        "shots": [{"url": pattern}],
        "identities": {"hero": {"images": [write_source_image(str(tmp_path / "source.jpg"))]}},
        "output": {"url": str(folder / "{shot}_recast.####.exr")},
    }
