"""Storage: URL round trips on local disk and the loopback S3, atomic publishing."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pipeline.errors import StorageError
from pipeline.store import storage


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


# -- create-only publishing (output.if_exists: fail / skip) --------------------------------------


def test_create_only_publish_never_replaces_a_local_file(tmp_path):
    src = tmp_path / "render.bin"
    src.write_bytes(b"the render")
    dest = tmp_path / "out" / "sc01.mp4"
    storage.publish_file(src, str(dest), overwrite=False)  # absent: published (folder made)
    assert dest.read_bytes() == b"the render" and dest.stat().st_nlink == 1  # the temporary link is gone
    dest.write_bytes(b"someone else's delivery")
    with pytest.raises(StorageError, match="sc01.mp4: already exists; left untouched") as err:
        storage.publish_file(src, str(dest), overwrite=False)
    assert err.value.reason == storage.ALREADY_EXISTS
    with pytest.raises(StorageError, match="already exists"):
        storage.write_bytes(f"file://{dest}", b"tracks", overwrite=False)
    assert dest.read_bytes() == b"someone else's delivery"
    assert os.listdir(dest.parent) == ["sc01.mp4"]  # no temporary file left
    # A dangling symlink is something there too: never replaced.
    link = tmp_path / "out" / "link.mp4"
    link.symlink_to(tmp_path / "nowhere.mp4")
    with pytest.raises(StorageError, match="already exists"):
        storage.publish_file(src, str(link), overwrite=False)
    assert link.is_symlink() and not (tmp_path / "nowhere.mp4").exists()
    storage.publish_file(src, str(dest))  # overwrite (the default) still replaces
    assert dest.read_bytes() == b"the render"


def test_create_only_publish_on_s3_is_a_conditional_put(s3_bucket, tmp_path):
    import fsspec

    src = tmp_path / "render.bin"
    src.write_bytes(b"the render")
    url = f"{s3_bucket}/deliveries/sc01.mp4"
    storage.publish_file(src, url, overwrite=False)
    assert storage.read_bytes(url) == b"the render"
    with pytest.raises(StorageError, match="already exists"):
        storage.publish_file(src, url, overwrite=False)
    # Another writer (another machine) puts the object after this process listed the folder:
    # the listing it caches says "absent", so only the PUT's If-None-Match can refuse it.
    other = f"{s3_bucket}/deliveries/sc02.mp4"
    assert storage.listdir(f"{s3_bucket}/deliveries") == [url]
    fsspec.filesystem("s3", skip_instance_cache=True).pipe_file(other.removeprefix("s3://"), b"theirs")
    assert not storage.exists(other)  # the stale listing
    with pytest.raises(StorageError, match="already exists"):
        storage.publish_file(src, other, overwrite=False)
    with pytest.raises(StorageError, match="already exists"):
        storage.write_bytes(other, b"tracks", overwrite=False)
    fresh = fsspec.filesystem("s3", skip_instance_cache=True)
    assert fresh.cat_file(other.removeprefix("s3://")) == b"theirs"


def test_write_check_leaves_no_folders_behind(tmp_path):
    storage.check_writable(str(tmp_path / "a" / "b" / "c"))
    assert os.listdir(tmp_path) == []
    (tmp_path / "kept").mkdir()
    storage.check_writable(str(tmp_path / "kept" / "new"))
    assert os.listdir(tmp_path) == ["kept"] and os.listdir(tmp_path / "kept") == []
    with pytest.raises(StorageError):
        storage.check_writable("/proc/recast-test/a/b")


def test_local_publish_fsyncs_the_file_before_the_rename_and_the_folder_after(tmp_path):
    """Observed with strace: the system calls themselves, in their order."""
    import shutil
    import subprocess
    import sys

    if shutil.which("strace") is None:
        pytest.skip("strace is not installed")
    src = tmp_path / "src.bin"
    src.write_bytes(b"x" * 4096)
    trace = tmp_path / "trace.txt"
    code = (
        "import sys; from pipeline.store import storage\n"
        "storage.publish_file(sys.argv[1], sys.argv[2])\n"
        "storage.publish_file(sys.argv[1], sys.argv[3], overwrite=False)\n"
    )
    done = subprocess.run(
        ["strace", "-f", "-qq", "-e", "trace=openat,fsync,rename,link", "-o", str(trace),
         sys.executable, "-c", code, str(src), str(tmp_path / "a.mp4"), str(tmp_path / "b.mp4")],
        capture_output=True, text=True, check=False,
        env={**os.environ, "PYTHONPATH": str(Path(storage.__file__).resolve().parents[1])},
    )  # fmt: skip
    if done.returncode != 0 and "ptrace" in done.stderr:
        pytest.skip(f"strace cannot trace here: {done.stderr.strip()}")
    assert done.returncode == 0, done.stderr
    calls = [
        line.split(None, 1)[1]
        for line in trace.read_text().splitlines()
        if str(tmp_path) in line or "fsync" in line
    ]
    fds: dict[str, str] = {}
    events = []
    for call in calls:
        if call.startswith("openat("):
            path, fd = call.split('"')[1], call.rsplit("= ", 1)[1]
            fds[fd] = path
        elif call.startswith("fsync("):
            events.append(("fsync", fds.get(call[6:].split(")")[0], "?")))
        elif call.startswith(("rename(", "link(")):
            events.append((call.split("(")[0], call.split('"')[3]))
    for name, publish in ((f"{tmp_path}/a.mp4", "rename"), (f"{tmp_path}/b.mp4", "link")):
        at = events.index((publish, name))
        tmp = f"{tmp_path}/.{name.rsplit('/', 1)[1]}{storage.TEMPORARY_MARK}"
        assert any(e == "fsync" and p.startswith(tmp) for e, p in events[:at]), events
        assert ("fsync", str(tmp_path)) in events[at:], events
