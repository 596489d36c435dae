"""Finding 11 of issue 29: inputs that raised tracebacks now exit 2 naming the field, file or variable.

Each case goes through a real entrypoint (``jobs.render.main``, ``jobs.verify.main``,
``jobs.detect_watermark.main``, or ``python -m jobs.render`` in a subprocess for what is read
at import) and asserts exit 2, the name in the message and no traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import cv2
import pytest
import ray
import yaml

from jobs import detect_watermark, verify
from jobs.render import EXIT_BAD_INPUT, main
from tests.faces_data import astronaut
from tests.faultjobs import job_spec, make_media
from tests.plates import write_sequence
from tests.raytools import REPO


@pytest.fixture(scope="module")
def media(tmp_path_factory) -> dict[str, str]:
    return make_media(str(tmp_path_factory.mktemp("late-media")))


def render(tmp_path: Path, spec: dict, capsys, *args: str) -> str:
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(spec))
    code = main([str(path), *args])
    err = capsys.readouterr().err
    assert code == EXIT_BAD_INPUT, err
    assert "Traceback" not in err and not ray.is_initialized(), err
    return err


@pytest.mark.parametrize(
    ("output", "words"),
    [
        ({"quality": 99}, ["output.quality", "quality 99 outside 0-51"]),
        ({"quality": -5}, ["output.quality", "quality -5 outside 0-51"]),
        ({"preset": "ultraslowest"}, ["output.preset", "'ultraslowest' not one of ultrafast"]),
        ({"preset": ""}, ["output.preset", "not one of"]),
        ({"quality": "best"}, ["output.quality", "valid integer"]),
    ],
)
def test_encoder_settings_are_checked_with_the_spec(media, tmp_path, capsys, output, words, no_ray) -> None:
    spec = job_spec(media, str(tmp_path / "out"), "late")
    spec["output"].update(output)
    err = render(tmp_path, spec, capsys)
    assert "bad job spec" in err and all(w in err for w in words), err


@pytest.mark.parametrize(
    ("name", "where", "words"),
    [
        ("plate.####.%04d.png", "shot", ["2 frame paddings in one name (####, %04d)"]),
        ("plate.@@@@.####.exr", "shot", ["2 frame paddings in one name (@@@@, ####)"]),
        ("plate.<UDIM>.####.exr", "shot", ["not a frame sequence pattern", "unsupported padding character"]),
        ("{shot}.%04d.####.exr", "output", ["2 frame paddings in one name (%04d, ####)"]),
    ],
)
def test_pattern_with_two_paddings(media, tmp_path, capsys, name, where, words, no_ray) -> None:
    spec = job_spec(media, str(tmp_path / "out"), "paddings")
    if where == "shot":
        url = str(tmp_path / "plates" / name)
        spec["shots"] = [{"name": "plate", "url": url, "fps": 24}]
        spec["output"]["url"] = str(tmp_path / "out" / "{shot}.####.{ext}")
    else:
        source = write_sequence(tmp_path / "plates", "plate", count=2, size=(64, 36))
        spec["shots"] = [{"name": "plate", "url": source}]
        spec["output"]["url"] = str(tmp_path / "out" / name)
        url = spec["output"]["url"].replace("{shot}", "plate")
    err = render(tmp_path, spec, capsys)
    assert url in err and all(w in err for w in words), err


def test_summary_json_that_is_a_folder(media, tmp_path, capsys, no_ray) -> None:
    err = render(
        tmp_path, job_spec(media, str(tmp_path / "out"), "summary"), capsys, "--summary-json", str(tmp_path)
    )
    assert f"--summary-json {tmp_path} is a directory" in err, err


def _anchor(tmp_path: Path, kind: str) -> str:
    path = (
        tmp_path / {"picture": "face.png", "text": "notes.pem", "large": "big.pem", "fifo": "fifo.pem"}[kind]
    )
    if kind == "picture":
        cv2.imwrite(str(path), astronaut())
    elif kind == "text":
        path.write_text("-----BEGIN PRIVATE KEY-----\nnot a certificate\n-----END PRIVATE KEY-----\n")
    elif kind == "large":
        path.write_text("-----BEGIN CERTIFICATE-----\n" + "A" * (2 << 20))
    else:
        os.mkfifo(path)
    return str(path)


@pytest.mark.ray  # runs an entrypoint that would start Ray if the refusal regressed
@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("kind", "words"),
    [
        ("picture", ["is not PEM text"]),
        ("text", ["holds no PEM certificate"]),
        ("large", ["larger than 1 MiB"]),
        ("fifo", ["is a FIFO"]),
    ],
)
def test_verify_trust_anchors_that_are_not_certificates(signed, tmp_path, capsys, kind, words) -> None:
    anchors = _anchor(tmp_path, kind)
    assert verify.main([str(signed["signed"]), "--trust-anchors", anchors]) == verify.EXIT_MISSING
    err = capsys.readouterr().err
    assert "--trust-anchors" in err and anchors in err and "Traceback" not in err, err
    assert all(w in err for w in words), err


@pytest.mark.ray  # runs an entrypoint that would start Ray if the refusal regressed
@pytest.mark.parametrize("step", ["inf", "nan", "1e9"])
def test_detect_watermark_step_must_be_finite(signed, capsys, step) -> None:
    assert detect_watermark.main([str(signed["signed"]), "--step", step, "--all-blocks"]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert "step" in err and "Traceback" not in err, err


@pytest.mark.ray  # runs an entrypoint that would start Ray if the refusal regressed
@pytest.mark.timeout(300)
@pytest.mark.parametrize("value", ["soon", "0.5", "nan", "11"])
def test_bad_min_chunk_environment_variable(media, tmp_path, value) -> None:
    """Read when the spec is parsed, not at import: ``python -m jobs.render`` exits 2 naming it."""
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(job_spec(media, str(tmp_path / "out"), "env")))
    proc = subprocess.run(
        [sys.executable, "-m", "jobs.render", str(path)], check=False, cwd=str(REPO), capture_output=True,
        text=True, timeout=240, env={**os.environ, "PYTHONPATH": str(REPO), "RECAST_MIN_CHUNK_SECONDS": value},
    )  # fmt: skip
    assert proc.returncode == EXIT_BAD_INPUT, proc.stderr[-3000:]
    assert "RECAST_MIN_CHUNK_SECONDS" in proc.stderr and repr(value) in proc.stderr, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
