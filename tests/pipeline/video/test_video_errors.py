"""Bad input: a typed error naming the file and what is wrong, and nothing written."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import av
import numpy as np
import pytest

from pipeline.errors import MediaError, SpecError, StorageError
from pipeline.store import storage
from pipeline.video.chunking import plan_chunks
from pipeline.video.decode import decode_range
from pipeline.video.probe import probe
from tests.clips import ClipSpec, write_audio, write_clip
from tests.raytools import REPO


def test_zero_byte_and_not_media(tmp_path) -> None:
    empty = tmp_path / "empty.mp4"
    empty.write_bytes(b"")
    with pytest.raises(MediaError, match="empty") as err:
        probe(str(empty))
    assert err.value.url == str(empty)
    text = tmp_path / "notes.mp4"
    text.write_bytes(b"this is not a video\n" * 100)
    with pytest.raises(MediaError, match="not a readable media file") as err:
        probe(str(text))
    assert str(text) in str(err.value)


def test_no_video_stream(tmp_path) -> None:
    path = str(tmp_path / "tone.m4a")
    write_audio(path, np.zeros(1024, np.float32))
    with pytest.raises(MediaError, match="no video stream"):
        probe(path)


def test_unsupported_codec(clips, tmp_path) -> None:
    data = Path(clips.path("no_audio")).read_bytes()
    assert data.count(b"V_MPEG4/ISO/AVC") == 1
    path = tmp_path / "alien.mkv"
    path.write_bytes(data.replace(b"V_MPEG4/ISO/AVC", b"V_MPEG4/ISO/XYZ"))  # a codec id FFmpeg does not know
    with pytest.raises(MediaError, match="unsupported video codec"):
        probe(str(path))


def test_truncated_sources_fail_saying_how_many_frames_decode(tmp_path) -> None:
    # MP4 with the index first: the header declares 75 frames, the data stops early.
    full = write_clip(str(tmp_path / "full.mp4"), ClipSpec(audio=False, options={}))
    faststart = str(tmp_path / "fast.mp4")
    with av.open(full) as src, av.open(faststart, "w", options={"movflags": "faststart"}) as dst:
        vs = dst.add_stream_from_template(src.streams.video[0])
        for packet in src.demux(src.streams.video[0]):
            if packet.dts is not None:
                packet.stream = vs
                dst.mux(packet)
    cut = tmp_path / "cut.mp4"
    data = Path(faststart).read_bytes()
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(MediaError, match=r"only \d+ of 75 frames") as err:
        probe(str(cut))
    assert str(cut) in str(err.value)
    partial = probe(str(cut), allow_truncated=True)
    assert 0 < partial.frame_count < 75
    # Matroska declares no frame count; its declared duration exposes the cut.
    mkv = write_clip(str(tmp_path / "full.mkv"), ClipSpec(audio=False))
    data = Path(mkv).read_bytes()
    (tmp_path / "cut.mkv").write_bytes(data[: len(data) * 6 // 10])
    with pytest.raises(MediaError, match=r"only \d+ of about 75 frames"):
        probe(str(tmp_path / "cut.mkv"))
    # A file that shrank after probing: decode says how far it got.
    info = probe(full)
    shutil.copyfile(str(cut), full)
    with pytest.raises(MediaError, match=r"only \d+ of 75 frames are decodable"):
        list(decode_range(full, info, 0, 75))


def test_missing_urls(tmp_path, s3_bucket) -> None:
    for url in (
        str(tmp_path / "nope.mp4"),
        f"file://{tmp_path}/nope.mp4",
        storage.join(s3_bucket, "nope.mp4"),
    ):
        with pytest.raises(StorageError, match="not found") as err:
            probe(url)
        assert err.value.url == url


def test_permission_denied(clips, tmp_path) -> None:
    path = tmp_path / "secret.mp4"
    shutil.copyfile(clips.path("cfr_bframes"), path)
    os.chmod(path, 0)
    if os.geteuid() != 0:
        with pytest.raises(StorageError, match="permission denied"):
            probe(str(path))
        return
    # root reads anything: run the probe as an unprivileged user instead.
    os.chmod(tmp_path, 0o755)
    code = (
        "import sys\nfrom pipeline.video.probe import probe\nfrom pipeline.errors import StorageError\n"
        "try:\n    probe(sys.argv[1])\nexcept StorageError as e:\n    print(e)\n"
    )
    try:
        done = subprocess.run(
            [sys.executable, "-c", code, str(path)],
            cwd=REPO,
            user=65534,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
    except PermissionError:
        pytest.skip("cannot switch to an unprivileged user here")
    if "ModuleNotFoundError" in done.stderr or "Permission denied" in done.stderr:
        pytest.skip(f"the unprivileged user cannot run the project's Python: {done.stderr[-200:]}")
    assert f"{path}: permission denied" in done.stdout, done.stderr


def test_chunk_length_out_of_range(clips) -> None:
    info = probe(clips.path("cfr_bframes"))
    with pytest.raises(SpecError, match="chunk_seconds"):
        plan_chunks(info, 45)
