"""Issue 41 (the cut): editorial documents made to crash, stall or flood the driver, through the real
entrypoint.  Each is refused with exit 2 naming the file, before Ray, with no traceback, no crash
signal, no temporary file left behind (a private ``TMPDIR``) and the destination untouched.

The deep documents run the driver as a program (``python -m jobs.render``): if a bound ever let one
reach OpenTimelineIO's reader in the driver's process, the crash would end that process, not the
test run.  A plugin adapter (:mod:`tests.hostile_otio_adapter`, registered as a studio registers
its own) stands for a document that still crashes or stalls the reader: the child process
isolates it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any

import opentimelineio as otio
import pytest
import yaml

from cluster.edit import with_edit_shots
from cluster.edit.bounds import MAX_CLIPS, MAX_NESTING
from cluster.edit.isolated import read_isolated
from cluster.spec.job import parse_spec
from jobs.render import EXIT_BAD_INPUT
from pipeline.errors import SpecError
from tests import hostile_otio_adapter
from tests.cluster.edit.cut_media import Plate, write_plate
from tests.jobs.refusals import KEEP, refused, run_main
from tests.raytools import REPO

STOP = 128 + signal.SIGTERM


@pytest.fixture(scope="module")
def plate(tmp_path_factory) -> Plate:
    """A 48-frame EXR plate at 01:00:00:00 in ``reels/A001C003/``, the reel every EDL event names."""
    return write_plate(str(tmp_path_factory.mktemp("hostile-cut-media")), "A001C003", count=48)


@pytest.fixture()
def private_tmp(tmp_path: Path, monkeypatch) -> Path:
    """A temporary folder of the test's own, for this process and the drivers it starts."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def spec_of(url: str, dest: Path, plate: Plate, **edit: Any) -> dict[str, Any]:
    from jobs.demo_media import write_source_image

    source = write_source_image(str(dest.parent / "source.jpg"))
    media = {"pattern": plate.url.replace(plate.reel, "{reel}")}
    return {
        "job_id": "hostile-cut",
        "edit": {"url": url, "media": media, **edit},
        "identities": {"hero": {"images": [source]}},
        "output": {"url": str(dest / "{shot}.####.exr")},
    }


def timecode(frame: int) -> str:
    return str(otio.opentime.to_timecode(otio.opentime.RationalTime(frame, 24), 24))


def edl(path: Path, events: int) -> str:
    """An EDL of ``events`` one-frame events of reel A001C003, each a frame of its 48, back to back."""
    lines = ["TITLE: hostile", "FCM: NON-DROP FRAME", ""]
    for i in range(events):
        source, record = 86400 + i % 47, 86400 + i
        lines.append(
            f"{i % 999 + 1:03d}  A001C003 V     C        {timecode(source)} {timecode(source + 1)} "
            f"{timecode(record)} {timecode(record + 1)}"
        )
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def deep_otio(path: Path, depth: int, *, kind: str) -> str:
    """A timeline whose metadata nests ``depth`` lists (``[``) or objects (``{"a":``) deep."""
    opener, closer = ("[", "]") if kind == "lists" else ('{"a":', "}")
    inner = "null" if kind == "objects" else ""
    text = (
        '{"OTIO_SCHEMA": "Timeline.1", "name": "deep", "metadata": {"x": '
        + opener * depth + inner + closer * depth
        + '}, "tracks": {"OTIO_SCHEMA": "Stack.1", "children": []}}'
    )  # fmt: skip
    path.write_text(text)
    return str(path)


def deep_xml(path: Path, depth: int) -> str:
    path.write_text(
        '<?xml version="1.0"?>\n<xmeml version="4">' + "<a>" * depth + "</a>" * depth + "</xmeml>"
    )
    return str(path)


def deep_otioz(path: Path, depth: int) -> str:
    content = Path(deep_otio(path.with_suffix(".otio"), depth, kind="lists")).read_bytes()
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("content.otio", content)
        zf.writestr("version.txt", "1.0.0")
    return str(path)


def run_driver(spec_path: Path, tmp: Path, **env: str) -> subprocess.Popen[str]:
    """``python -m jobs.render spec_path`` as a program, with ``tmp`` as its temporary folder."""
    return subprocess.Popen(
        [sys.executable, "-m", "jobs.render", str(spec_path)],
        cwd=REPO,
        env={**os.environ, "TMPDIR": str(tmp), "RAY_ADDRESS": "", **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def write_spec(tmp_path: Path, spec: dict[str, Any]) -> Path:
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def assert_clean(dest: Path, tmp: Path) -> None:
    """Nothing written, nothing left in the driver's temporary folder; the driver refused the job
    before Ray (exit 2), as ``no_ray`` asserts of this process."""
    assert sorted(p.name for p in dest.iterdir()) == ["keep.mp4"]
    assert (dest / "keep.mp4").read_bytes() == KEEP
    assert list(tmp.iterdir()) == [], list(tmp.iterdir())


# -- High: a deeply nested cut kills or hangs the driver ----------------------------------------


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("name", "make"),
    [
        ("lists.otio", lambda p: deep_otio(p, 200_000, kind="lists")),  # the audit's SIGSEGV
        ("objects.otio", lambda p: deep_otio(p, 200_000, kind="objects")),
        ("twenty.otio", lambda p: deep_otio(p, 20_000, kind="lists")),  # the audit's 90 s stall
        ("just-past.otio", lambda p: deep_otio(p, MAX_NESTING, kind="objects")),
        ("deep.xml", lambda p: deep_xml(p, 200_000)),
        ("deep.otioz", lambda p: deep_otioz(p, 200_000)),
    ],
)
def test_a_deeply_nested_cut_is_refused_by_a_driver_that_lives(
    name, make, plate, dest, tmp_path, private_tmp, no_ray
) -> None:
    cut = make(tmp_path / name)
    driver = run_driver(write_spec(tmp_path, spec_of(cut, dest, plate)), private_tmp)
    out, err = driver.communicate(timeout=60)
    assert driver.returncode == EXIT_BAD_INPUT, err
    assert "edit.url" in err and cut in err and f"nested deeper than {MAX_NESTING} levels" in err, err
    assert "Traceback" not in out + err
    assert_clean(dest, private_tmp)


def test_a_cut_within_the_nesting_bound_is_read(plate, dest, tmp_path) -> None:
    """Metadata nested within the bound is no refusal: a cut of one clip with deep metadata is read."""
    track = otio.schema.Track(name="V1")
    clip = otio.schema.Clip(
        name="sc01",
        source_range=otio.opentime.TimeRange(
            otio.opentime.from_timecode("01:00:00:10", 24), otio.opentime.RationalTime(5, 24)
        ),
    )
    clip.metadata["cmx_3600"] = {"reel": "A001C003"}
    nested: Any = {}
    for _ in range(MAX_NESTING - 12):
        nested = {"a": nested}
    clip.metadata["deep"] = nested
    track.append(clip)
    path = str(tmp_path / "ok.otio")
    otio.adapters.write_to_file(otio.schema.Timeline(name="ok", tracks=[track]), path)
    spec, plan = with_edit_shots(parse_spec(spec_of(path, dest, plate)))
    assert plan is not None and [(s.name, str(s.frames)) for s in spec.shots] == [("sc01", "1011-1015")]


# -- a reader that still crashes, stalls or hogs runs in a child process ------------------------


@pytest.fixture()
def hostile(tmp_path: Path, monkeypatch) -> dict[str, str]:
    """The environment that registers the hostile adapter, for this process and its children."""
    env = {"OTIO_PLUGIN_MANIFEST_PATH": hostile_otio_adapter.manifest(tmp_path)}
    monkeypatch.setenv("OTIO_PLUGIN_MANIFEST_PATH", env["OTIO_PLUGIN_MANIFEST_PATH"])
    return env


@pytest.mark.timeout(120)
def test_a_reader_that_crashes_is_a_refusal_naming_the_file(
    plate, dest, tmp_path, private_tmp, hostile, no_ray
) -> None:
    cut = tmp_path / "crash.hostile"
    cut.write_text("crash")
    spec = spec_of(str(cut), dest, plate, adapter=hostile_otio_adapter.NAME)
    driver = run_driver(write_spec(tmp_path, spec), private_tmp, **hostile)
    out, err = driver.communicate(timeout=60)
    assert driver.returncode == EXIT_BAD_INPUT, err
    assert str(cut) in err and f"the {hostile_otio_adapter.NAME} reader crashed (SIGSEGV)" in err, err
    assert "Traceback" not in out + err
    assert_clean(dest, private_tmp)


@pytest.mark.timeout(120)
def test_a_driver_stopped_while_a_reader_stalls_leaves_at_once(
    plate, dest, tmp_path, private_tmp, hostile, no_ray
) -> None:
    """The audit's driver ignored SIGTERM for 90 s inside the reader; now the reader is a child the
    driver stops with itself, and the private copy of the cut goes too."""
    cut = tmp_path / "hang.hostile"
    cut.write_text("hang")
    pid_file = tmp_path / "reader.pid"
    spec = spec_of(str(cut), dest, plate, adapter=hostile_otio_adapter.NAME)
    driver = run_driver(write_spec(tmp_path, spec), private_tmp, HOSTILE_PID_FILE=str(pid_file), **hostile)
    deadline = time.monotonic() + 60
    while not pid_file.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert pid_file.exists(), driver.communicate(timeout=10)
    reader = int(pid_file.read_text())
    driver.send_signal(signal.SIGTERM)
    _out, err = driver.communicate(timeout=20)  # the stop's own deadline is 45 s: this is far sooner
    assert driver.returncode == STOP, err
    with pytest.raises(ProcessLookupError):
        os.kill(reader, 0)
    assert_clean(dest, private_tmp)


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("what", "said"), [("hang", "did not finish in 2 s"), ("hog", "")])
def test_a_reader_that_stalls_or_hogs_memory_is_bounded(tmp_path, hostile, what, said, monkeypatch) -> None:
    from cluster.edit import isolated

    monkeypatch.setattr(isolated, "READ_MEMORY", 512 << 20)
    path = tmp_path / f"{what}.hostile"
    path.write_text(what)
    with pytest.raises(SpecError) as err:
        read_isolated(str(path), hostile_otio_adapter.NAME, field="edit.url", url="cut.hostile", seconds=2)
    assert err.value.field == "edit.url" and "cut.hostile" in err.value.reason
    if what == "hog":
        assert "MemoryError" in err.value.reason or "memory" in err.value.reason, err.value.reason
    else:
        assert said in err.value.reason


# -- Medium: a large EDL stalls the driver ------------------------------------------------------


@pytest.mark.timeout(60)
def test_an_edl_of_more_events_than_the_bound_is_refused_unread(
    plate, dest, tmp_path, capsys, private_tmp, no_ray
) -> None:
    cut = edl(tmp_path / "huge.edl", MAX_CLIPS + 10_000)
    assert run_main(tmp_path, spec_of(cut, dest, plate)) == EXIT_BAD_INPUT
    err = refused(dest, capsys, "edit.url", cut, f"{MAX_CLIPS + 10_000:,} clips (events)", f"{MAX_CLIPS:,}")
    assert "Traceback" not in err
    assert list(private_tmp.iterdir()) == []


@pytest.mark.timeout(60)
def test_an_edl_of_ten_thousand_events_is_read_in_linear_time(plate, dest, tmp_path) -> None:
    """Every step of reading a cut is linear in its events (the record times from one pass over each
    track, each reel resolved once, overlaps found by a sweep).  The time is a FIGURE, logged; the
    timeout is a hang guard only (the audit's reader took 13.6 s for 30,000 and over 60 s for 100,000)."""
    cut = edl(tmp_path / "ten.edl", 10_000)
    started = time.perf_counter()
    spec, plan = with_edit_shots(parse_spec(spec_of(cut, dest, plate)))
    print(f"FIGURE 10,000-event EDL read in {time.perf_counter() - started:.2f} s")
    assert plan is not None and len(plan.clips) == 10_000
    assert len(spec.shots) == 47  # one shot per distinct frame of the reel; the repeats share it
    assert sum(c.shared for c in plan.clips) == 10_000 - 47


# -- Low: a 1 MB .otioz holding 1 GiB of zeros ----------------------------------------------------


@pytest.mark.timeout(120)
def test_a_zip_bomb_otioz_is_refused_before_anything_is_unpacked(
    plate, dest, tmp_path, capsys, private_tmp, no_ray
) -> None:
    bomb = tmp_path / "bomb.otioz"
    track = otio.schema.Track(name="V1")
    timeline = otio.schema.Timeline(name="bomb", tracks=[track])
    with zipfile.ZipFile(bomb, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("content.otio", timeline.to_json_string())
        with zf.open("media/zeros.mov", "w", force_zip64=True) as member:
            block = bytes(1 << 20)
            for _ in range(1024):
                member.write(block)
    assert bomb.stat().st_size < 2 << 20
    assert run_main(tmp_path, spec_of(str(bomb), dest, plate)) == EXIT_BAD_INPUT
    err = refused(dest, capsys, "edit.url", str(bomb), "'media/zeros.mov' unpacks to 1 GiB", "zip bomb")
    assert "Traceback" not in err
    assert list(private_tmp.iterdir()) == []
