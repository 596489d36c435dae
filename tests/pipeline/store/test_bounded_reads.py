"""Bounded reads: ``storage.read_bytes(max_bytes=...)`` on local files and loopback S3, and
non-regular files (``/dev/zero``, a FIFO, a folder, a socket) refused by type before any open.

The FIFO tests cannot hang: nothing writes to the FIFO, so an ``open()`` would block
forever; a refusal by ``os.stat`` returns at once (and the timeout marker fails the test
instead of hanging the suite if it ever regresses)."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path

import fsspec
import pytest

from pipeline.errors import InputRefused, SpecError, StorageError
from pipeline.limits import MIB, InputLimits, min_chunk_seconds
from pipeline.store import storage


@pytest.fixture()
def odd_files(tmp_path: Path) -> Iterator[dict[str, str]]:
    """A FIFO, a folder, a UNIX socket and /dev/zero, each named like a file."""
    fifo = tmp_path / "spec.yaml"
    os.mkfifo(fifo)
    folder = tmp_path / "folder.yaml"
    folder.mkdir()
    sock_path = tmp_path / "sock.yaml"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(sock_path))
    try:
        yield {
            "fifo": str(fifo),
            "folder": str(folder),
            "socket": str(sock_path),
            "/dev/zero": "/dev/zero",
        }
    finally:
        sock.close()


KIND_WORDS = {"fifo": "FIFO", "folder": "directory", "socket": "socket", "/dev/zero": "character device"}


@pytest.mark.timeout(30)
@pytest.mark.parametrize("kind", list(KIND_WORDS))
def test_non_regular_files_are_refused_before_opening(odd_files, kind: str) -> None:
    url = odd_files[kind]
    for read in (
        lambda: storage.read_bytes(url, max_bytes=MIB),
        lambda: storage.read_bytes(url),
        lambda: storage.open_read(url).__enter__(),
        lambda: storage.fetched(url).__enter__(),
    ):
        with pytest.raises(InputRefused) as err:
            read()
        assert err.value.url == url and KIND_WORDS[kind] in err.value.reason, str(err.value)
        assert "expected a regular file" in err.value.reason


def test_read_bytes_stops_at_the_limit_locally(tmp_path: Path) -> None:
    big = tmp_path / "big.yaml"
    big.write_bytes(b"x" * (MIB + 1))
    with pytest.raises(InputRefused, match="larger than 1 MiB"):
        storage.read_bytes(str(big), max_bytes=MIB)
    exact = tmp_path / "exact.yaml"
    exact.write_bytes(b"y" * MIB)
    assert storage.read_bytes(str(exact), max_bytes=MIB) == b"y" * MIB
    assert storage.read_bytes(f"file://{exact}", max_bytes=MIB) == b"y" * MIB


def test_read_bytes_stops_at_the_limit_on_s3(s3_bucket: str) -> None:
    fs = fsspec.filesystem("s3", skip_instance_cache=True)
    url = f"{s3_bucket}/policy.yaml"
    fs.pipe_file(url.removeprefix("s3://"), b"z" * 5000)
    with pytest.raises(InputRefused) as err:
        storage.read_bytes(url, max_bytes=4096)
    assert err.value.url == url and "larger than 4 KiB" in err.value.reason
    assert storage.read_bytes(url, max_bytes=5000) == b"z" * 5000


def test_describe_bytes() -> None:
    assert storage.describe_bytes(MIB) == "1 MiB"
    assert storage.describe_bytes(50 * MIB) == "50 MiB"
    assert storage.describe_bytes(1536) == "1.5 KiB"
    assert storage.describe_bytes(12) == "12 bytes"


def test_frame_limits_default_to_16k_a_side_and_8k_by_8k() -> None:
    limits = InputLimits()
    assert limits.frame_problem(16_384, 4096) is None and limits.frame_problem(8192, 8192) is None
    assert "wider than limits.max_width 16384" in (limits.frame_problem(16_385, 16) or "")
    assert "taller than limits.max_height 16384" in (limits.frame_problem(16, 16_385) or "")
    assert "limits.max_pixels" in (limits.frame_problem(8192, 8193) or "")


def test_chunk_floor_comes_from_the_environment_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RECAST_MIN_CHUNK_SECONDS", raising=False)
    assert min_chunk_seconds() == 10.0
    monkeypatch.setenv("RECAST_MIN_CHUNK_SECONDS", "2")
    assert min_chunk_seconds() == 2.0
    for bad in ("0.5", "11", "soon", "nan"):
        monkeypatch.setenv("RECAST_MIN_CHUNK_SECONDS", bad)
        with pytest.raises(SpecError, match="RECAST_MIN_CHUNK_SECONDS"):
            min_chunk_seconds()


def test_a_path_through_a_file_reads_as_not_found(tmp_path: Path) -> None:
    (tmp_path / "pack").write_bytes(b"a file where a folder belongs")
    for url in ("/dev/zero/manifest.json", str(tmp_path / "pack" / "manifest.json")):
        with pytest.raises(StorageError) as err:
            storage.read_bytes(url, max_bytes=MIB)
        assert err.value.url == url and err.value.reason.startswith("not found"), str(err.value)
