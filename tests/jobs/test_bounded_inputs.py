"""Bounded inputs through the real entrypoint (``jobs.render.main``): every case exits 2 before
Ray starts, names the field or file and what is wrong, and leaves the destination untouched.

FIFO cases cannot hang: nothing ever writes to the FIFOs, so only a refusal before ``open()``
lets them return (the timeout marker fails rather than hangs if that regresses)."""

from __future__ import annotations

import os
import struct
import zlib

import pytest
import yaml

from jobs.render import EXIT_BAD_INPUT, main
from tests.faultjobs import job_spec, make_media
from tests.hostile_inputs import wide_video
from tests.jobs.refusals import refused, run_main


@pytest.fixture(scope="module")
def media(tmp_path_factory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("bounded-media")
    out = make_media(str(root))
    out["wide"] = wide_video(root / "wide.mkv", 16_400, 16)
    text = root / "hero.jpg"
    text.write_text("not a picture: a shot list\n" * 20)
    out["text_jpg"] = str(text)
    bomb = root / "bomb.png"
    ihdr = struct.pack(">IIBBBBB", 10_000, 8_000, 8, 2, 0, 0, 0)

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    bomb.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IEND", b""))
    out["bomb"] = str(bomb)
    return out


def test_spec_over_1_mib(media, dest, tmp_path, capsys, no_ray) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(job_spec(media, str(dest), "big")) + "#" + "x" * (1 << 20))
    assert main([str(path)]) == EXIT_BAD_INPUT
    refused(dest, capsys, "bad job spec", str(path), "larger than 1 MiB")


@pytest.mark.timeout(60)
def test_spec_fifo(dest, tmp_path, capsys, no_ray) -> None:
    fifo = tmp_path / "job.yaml"
    os.mkfifo(fifo)
    assert main([str(fifo)]) == EXIT_BAD_INPUT
    refused(dest, capsys, str(fifo), "is a FIFO")


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "folder"])
def test_source_that_is_not_a_regular_file(media, dest, tmp_path, capsys, kind, no_ray) -> None:
    source = tmp_path / "plate.mov"
    if kind == "fifo":
        os.mkfifo(source)
    elif kind == "dev-zero":
        source.symlink_to("/dev/zero")
    else:
        source.mkdir()
    spec = job_spec(media, str(dest), "odd-source")
    spec["shots"] = [{"name": "odd", "url": str(source)}]
    assert run_main(tmp_path, spec) == EXIT_BAD_INPUT
    words = {"fifo": "a FIFO", "dev-zero": "a character device", "folder": "a directory"}[kind]
    refused(dest, capsys, str(source), words, "expected a regular file")


def test_source_larger_than_the_frame_limit(media, dest, tmp_path, capsys, no_ray) -> None:
    spec = job_spec(media, str(dest), "wide")
    spec["shots"] = [{"name": "wide", "url": media["wide"]}]
    assert run_main(tmp_path, spec) == EXIT_BAD_INPUT
    refused(dest, capsys, media["wide"], "16400x16", "limits.max_width 16384")


def test_pattern_over_the_shot_limit(media, dest, tmp_path, capsys, no_ray) -> None:
    plates = tmp_path / "plates"
    plates.mkdir()
    for i in range(4):
        (plates / f"sc{i}.mp4").write_bytes(b"x")
    spec = job_spec(media, str(dest), "many", limits={"max_shots": 3})
    spec["shots"] = [{"pattern": str(plates / "*.mp4")}]
    assert run_main(tmp_path, spec) == EXIT_BAD_INPUT
    refused(dest, capsys, "shots[0].pattern", "more than 3 shots", "limits.max_shots")


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("picture", "words"),
    [
        ("text_jpg", ["hero.jpg", "not a readable image"]),
        ("bomb", ["bomb.png", "10000x8000", "limits.max_image_pixels"]),
        ("fifo", ["is a FIFO"]),
    ],
)
def test_identity_picture_checked_before_ray(media, dest, tmp_path, capsys, picture, words, no_ray) -> None:
    if picture == "fifo":
        url = str(tmp_path / "hero.jpg")
        os.mkfifo(url)
    else:
        url = media[picture]
    spec = job_spec(media, str(dest), "picture")
    spec["identities"]["hero"]["images"] = [media["source"], url]
    assert run_main(tmp_path, spec) == EXIT_BAD_INPUT
    refused(dest, capsys, "identities.hero.images[1]", *words)


def test_cache_dir_outside_the_cache_root(media, dest, tmp_path, capsys, monkeypatch, no_ray) -> None:
    monkeypatch.setenv("RECAST_CACHE_DIR", str(tmp_path / "cache-root"))
    spec = job_spec(media, str(dest), "cache", models={"cache_dir": str(tmp_path / "elsewhere")})
    assert run_main(tmp_path, spec) == EXIT_BAD_INPUT
    refused(dest, capsys, "models.cache_dir", "outside the cache root")


def test_chunk_range_widened(media, dest, tmp_path, capsys, monkeypatch, no_ray) -> None:
    monkeypatch.delenv("RECAST_MIN_CHUNK_SECONDS")
    spec = job_spec(media, str(dest), "chunks")  # 1 s chunks: below a real cluster's 10 s floor
    assert run_main(tmp_path, spec) == EXIT_BAD_INPUT
    refused(dest, capsys, "chunking.min_seconds", "at least 10")
