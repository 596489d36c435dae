"""Storage: URL round trips on local disk and the loopback S3, atomic publishing."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pipeline import storage
from pipeline.errors import StorageError


def test_local_round_trip_and_listing(tmp_path):
    url = f"file://{tmp_path}/a/b.bin"
    storage.write_bytes(url, b"hello")
    assert storage.read_bytes(url) == b"hello"
    assert storage.exists(url) and storage.size(url) == 5
    with storage.open_read(str(tmp_path / "a" / "b.bin")) as fh:
        assert fh.read() == b"hello"
    assert storage.listdir(f"{tmp_path}/a") == [f"{tmp_path}/a/b.bin"]
    storage.remove(url)
    assert not storage.exists(url)


def test_publish_is_atomic_and_leaves_no_temp_file(tmp_path):
    src = tmp_path / "src.bin"
    src.write_bytes(b"x" * 1000)
    dest = tmp_path / "out" / "final.bin"
    storage.publish_file(src, str(dest))
    assert dest.read_bytes() == b"x" * 1000
    assert os.listdir(dest.parent) == ["final.bin"]


def test_failed_publish_leaves_destination_as_it_was(tmp_path):
    dest = tmp_path / "final.bin"
    dest.write_bytes(b"old")
    with pytest.raises(StorageError, match="src-missing: not found"):
        storage.publish_file(tmp_path / "src-missing", str(dest))
    assert dest.read_bytes() == b"old"
    assert os.listdir(tmp_path) == ["final.bin"]


def test_missing_file_names_the_url(tmp_path):
    missing = f"{tmp_path}/nope.mp4"
    with pytest.raises(StorageError, match="nope.mp4: not found"):
        storage.read_bytes(missing)
    with pytest.raises(StorageError, match="not found"), storage.open_read(missing):
        pass


def test_unwritable_location_is_a_storage_error():
    # /proc refuses new files even for root, so this holds in CI containers too.
    with pytest.raises(StorageError, match="/proc/recast-test"):
        storage.check_writable("/proc/recast-test")


def test_s3_round_trip(s3_bucket, tmp_path):
    url = f"{s3_bucket}/dir/obj.bin"
    storage.write_bytes(url, b"abc" * 1000)
    assert storage.read_bytes(url) == b"abc" * 1000
    with storage.open_read(url) as fh:
        fh.seek(2997)
        assert fh.read() == b"abc"
    src = tmp_path / "f.bin"
    src.write_bytes(b"published")
    storage.publish_file(src, f"{s3_bucket}/dir/pub.bin")
    assert storage.listdir(f"{s3_bucket}/dir") == [f"{s3_bucket}/dir/obj.bin", f"{s3_bucket}/dir/pub.bin"]
    with storage.fetched(f"{s3_bucket}/dir/pub.bin", suffix=".bin") as local:
        assert Path(local).read_bytes() == b"published"
    storage.remove(f"{s3_bucket}/dir", recursive=True)
    assert storage.listdir(f"{s3_bucket}/dir") == []


def test_s3_missing_bucket_and_key(s3_endpoint, s3_bucket):
    with pytest.raises(StorageError, match="not found"):
        storage.read_bytes(f"{s3_bucket}/missing.mp4")
    with pytest.raises(StorageError, match="recast-no-such-bucket"):
        storage.read_bytes("s3://recast-no-such-bucket/x.mp4")
