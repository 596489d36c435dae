"""What a resumed job trusts, checked without Ray on real work areas, files and a loopback S3 store.

A reused segment must be in the shot's segments folder and hash to its record; with
``RECAST_MANIFEST_KEY`` only records signed with it are trusted; a record in an old or
foreign format is treated as absent, never a crash; a source swapped for a same-size
file with its mtime kept (``cp -p``), locally or on S3, changes the shot's fingerprint.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import time
from pathlib import Path

import fsspec
import numpy as np
import pytest

from cluster.spec.job import parse_spec
from cluster.state.fingerprints import input_fingerprint
from cluster.state.keys import AnalysisKey, RenderKey, ShotKey, TrackKey
from cluster.state.ledger import Ledger
from cluster.state.manifest import JobManifest, RenderRecord, SegmentHome, faces_to_npz
from cluster.state.manifest_sign import MANIFEST_KEY_ENV, manifest_key
from cluster.state.segment_record import is_file_in
from pipeline.errors import ChecksumError, SpecError
from pipeline.geometry.types import Face
from pipeline.plates.probe import probe_sequence
from pipeline.store import storage
from pipeline.store.hashing import fetch_verified
from pipeline.tracking.tracker import TrackingConfig, track_chunk
from pipeline.video.probe import probe
from tests.clips import with_timecode
from tests.faultjobs import job_spec, make_media
from tests.plates import write_sequence

logger = logging.getLogger(__name__)
KEY = "k3y-that-is-long-enough-0123456789"


def _faces(frames: int) -> list[list[Face]]:
    box = np.array([10, 10, 60, 70], np.float32)
    marks = np.array([[20, 30], [40, 30], [30, 45], [22, 58], [38, 58]], np.float32)
    return [[Face(box + i, marks + i, 0.9, np.ones(4, np.float32) / 2)] for i in range(frames)]


def _segment(folder: Path, name: str, data: bytes) -> RenderRecord:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(data)
    sha = hashlib.sha256(data).hexdigest()
    return RenderRecord(0, RenderKey("r"), str(folder / name), sha, len(data), 24, 1, "actor-0")


def _edit(path: Path, **changes: object) -> None:
    data = json.loads(path.read_text())
    data.update(changes)
    path.write_text(json.dumps(data))


def test_is_file_in_takes_one_plain_name_under_the_exact_folder() -> None:
    folder = "s3://b/work/segments/sc01"
    assert is_file_in(f"{folder}/00000-abc.mkv", folder)
    assert is_file_in(f"{folder}/00000-abc.matte.mov", folder + "/")
    for outside in [
        "s3://b/work/segments/sc01x/00000.mkv",  # a sibling folder sharing the prefix
        f"{folder}/../sc02/00000.mkv",
        f"{folder}/./00000.mkv",
        f"{folder}//00000.mkv",
        f"{folder}/sub/00000.mkv",
        f"{folder}/..",
        f"{folder}/",
        f"{folder}/%2e%2e",
        "s3://other/work/segments/sc01/00000.mkv",
        "/tmp/work/segments/sc01/00000.mkv",
    ]:
        assert not is_file_in(outside, folder), outside


def test_a_reused_segment_must_hash_to_its_record_and_be_in_its_folder(tmp_path) -> None:
    manifest = JobManifest(str(tmp_path / "work"))
    ledger = Ledger(manifest, resumed=True)
    folder = tmp_path / "work" / "segments" / "a"
    home = SegmentHome(folder=str(folder))
    record = _segment(folder, "00000-r.mkv", b"rendered segment bytes")
    assert ledger.commit_segment("a", record) is None
    assert ledger.segment("a", 0, RenderKey("r"), home) == record
    assert manifest.take_warnings() == []

    # The same size, other bytes: not reused, and the summary is told which shot, chunk and segment.
    Path(record.segment_url).write_bytes(b"tampered segment bytes")
    assert ledger.segment("a", 0, RenderKey("r"), home) is None
    (warning,) = manifest.take_warnings()
    assert "a chunk 0" in warning and record.segment_url in warning and "sha256" in warning

    # A record pointing outside the folder, at a file of the right size and sha256: ignored.
    outside = _segment(tmp_path / "elsewhere", "00000-r.mkv", b"rendered segment bytes")
    _edit(tmp_path / "work" / "manifest" / "a" / "render-00000.json", segment_url=outside.segment_url)
    assert ledger.segment("a", 0, RenderKey("r"), home) is None
    (warning,) = manifest.take_warnings()
    assert outside.segment_url in warning and "not in this job's segments" in warning
    # ... or climbing out of it with '..'.
    _edit(
        tmp_path / "work" / "manifest" / "a" / "render-00000.json",
        segment_url=f"{folder}/../../elsewhere/00000-r.mkv",
    )
    (tmp_path / "work" / "elsewhere").mkdir()
    shutil.copy(outside.segment_url, tmp_path / "work" / "elsewhere" / "00000-r.mkv")
    assert ledger.segment("a", 0, RenderKey("r"), home) is None
    assert len(manifest.take_warnings()) == 1


def test_fetch_for_the_merge_hashes_the_private_copy(tmp_path) -> None:
    src = tmp_path / "seg.mkv"
    src.write_bytes(b"segment")
    good = hashlib.sha256(b"segment").hexdigest()
    assert Path(fetch_verified(str(src), str(tmp_path / "copy"), good)).read_bytes() == b"segment"
    with pytest.raises(ChecksumError) as caught:
        fetch_verified(str(src), str(tmp_path / "copy2"), "0" * 64)
    assert caught.value.url == str(src)


def test_with_a_key_only_records_signed_with_it_are_trusted(tmp_path, monkeypatch) -> None:
    work = tmp_path / "work"
    key = manifest_key({MANIFEST_KEY_ENV: KEY})
    signed = JobManifest(str(work), key)
    writer = Ledger(signed, resumed=False)
    writer.commit_analysis("a", 0, AnalysisKey("k0"), _faces(3), "actor-0")
    writer.commit_analysis("a", 1, AnalysisKey("k1"), _faces(3), "actor-0")
    ids, state = track_chunk(_faces(3), 0, TrackingConfig(), None)
    writer.commit_tracking("a", 0, TrackKey("t0"), None, state, ids)
    record = _segment(work / "segments" / "a", "00000-r.mkv", b"segment")
    assert writer.commit_segment("a", record) is None
    files = [p for p in work.rglob("*") if p.is_file()]
    for path in files:
        assert KEY.encode() not in path.read_bytes(), path  # the key is never written
        if path.suffix == ".json":
            assert "mac" in json.loads(path.read_text()), path

    reader = Ledger(JobManifest(str(work), key), resumed=True)
    home = SegmentHome(folder=str(work / "segments" / "a"))
    assert reader.analysis("a", 0, AnalysisKey("k0"), 3) is not None
    assert reader.tracking("a", 0, TrackKey("t0"), 3) is not None
    assert reader.segment("a", 0, RenderKey("r"), home) == record

    manifest_dir = work / "manifest" / "a"
    _edit(manifest_dir / "render-00000.json", faces_swapped=7)  # edited, the old mac kept
    data = json.loads((manifest_dir / "analysis-00000.json").read_text())
    del data["mac"]  # unsigned
    (manifest_dir / "analysis-00000.json").write_text(json.dumps(data))
    # Signed, but moved to another chunk's name.
    shutil.copy(manifest_dir / "analysis-00001.json", manifest_dir / "analysis-00002.json")
    shutil.copy(manifest_dir / "analysis-00001.npz", manifest_dir / "analysis-00002.npz")
    _edit(manifest_dir / "analysis-00002.json", chunk=2)

    manifest = JobManifest(str(work), key)
    reader = Ledger(manifest, resumed=True)
    assert reader.segment("a", 0, RenderKey("r"), home) is None
    assert reader.analysis("a", 0, AnalysisKey("k0"), 3) is None
    assert reader.analysis("a", 2, AnalysisKey("k1"), 3) is None
    assert reader.analysis("a", 1, AnalysisKey("k1"), 3) is not None  # untouched: trusted
    (warning,) = manifest.take_warnings()
    assert warning.startswith("3 manifest record(s) were unsigned or not signed with RECAST_MANIFEST_KEY")
    assert KEY not in warning

    # Records of a run without the key are not trusted by a run with it; without a key, all are read.
    plain = tmp_path / "plain"
    Ledger(JobManifest(str(plain)), resumed=False).commit_analysis("a", 0, AnalysisKey("k0"), _faces(3), "x")
    assert Ledger(JobManifest(str(plain), key), resumed=True).analysis("a", 0, AnalysisKey("k0"), 3) is None
    assert Ledger(JobManifest(str(plain)), resumed=True).analysis("a", 0, AnalysisKey("k0"), 3) is not None
    assert Ledger(JobManifest(str(work)), resumed=True).analysis("a", 1, AnalysisKey("k1"), 3) is not None


def test_a_short_manifest_key_is_refused_without_showing_it() -> None:
    assert manifest_key({}) is None
    with pytest.raises(SpecError) as caught:
        manifest_key({MANIFEST_KEY_ENV: "hunter2"})
    assert caught.value.field == MANIFEST_KEY_ENV and "hunter2" not in str(caught.value)
    with pytest.raises(SpecError):
        manifest_key({MANIFEST_KEY_ENV: ""})


@pytest.mark.parametrize(
    "content",
    [
        b"{not json",
        b"\xff\xfe garbage",
        b"[1, 2, 3]",
        json.dumps({"version": 1, "key": "t0", "track_ids": "abc", "state_out": {}}).encode(),
        json.dumps({"version": 1, "key": "t0", "track_ids": [[0]] * 3, "state_out": 5}).encode(),
        json.dumps({"version": 1, "key": "t0", "track_ids": [[0]] * 3, "state_out": {"version": 0}}).encode(),
        json.dumps({"version": 1, "key": "t0", "state_out": {}}).encode(),
        json.dumps({"version": 1, "key": "t0", "track_ids": 3, "state_out": None}).encode(),
    ],
)
def test_a_track_record_in_a_foreign_format_is_stale_not_a_crash(tmp_path, content) -> None:
    manifest = JobManifest(str(tmp_path / "work"))
    writer = Ledger(manifest, resumed=False)
    ids, state = track_chunk(_faces(3), 0, TrackingConfig(), None)
    writer.commit_tracking("a", 0, TrackKey("t0"), None, state, ids)
    writer.commit_tracking("a", 1, TrackKey("t1"), state.to_dict(), state, ids)
    (tmp_path / "work" / "manifest" / "a" / "track-00000.json").write_bytes(content)
    reader = Ledger(manifest, resumed=True)
    assert reader.tracking("a", 0, TrackKey("t0"), 3) is None
    assert reader.tracking("a", 1, TrackKey("t1"), 3) is None  # the chain is tracked again from there


def test_garbage_analysis_render_job_and_shot_records_are_absent(tmp_path) -> None:
    work = tmp_path / "work"
    manifest = JobManifest(str(work))
    ledger = Ledger(manifest, resumed=True)
    shot_dir = work / "manifest" / "a"
    shot_dir.mkdir(parents=True)
    # An npz that is garbage although its record names its sha256.
    junk = b"PK\x03\x04 not a zip"
    (shot_dir / "analysis-00000.npz").write_bytes(junk)
    record = {"version": 1, "chunk": 0, "key": "k", "sha256": hashlib.sha256(junk).hexdigest(), "frames": 3}
    (shot_dir / "analysis-00000.json").write_text(json.dumps(record))
    npz = faces_to_npz(_faces(3))[:-40]  # truncated
    (shot_dir / "analysis-00001.npz").write_bytes(npz)
    (shot_dir / "analysis-00001.json").write_text(
        json.dumps(record | {"sha256": hashlib.sha256(npz).hexdigest()})
    )
    assert ledger.analysis("a", 0, AnalysisKey("k"), 3) is None
    assert ledger.analysis("a", 1, AnalysisKey("k"), 3) is None
    home = SegmentHome(folder=str(work / "segments" / "a"))
    for i, bad in enumerate(
        [
            {"segment_url": 5, "sha256": "x", "bytes": 1, "frames": 1},
            {"sha256": "x", "bytes": 1, "frames": 1},
            {"segment_url": "x", "sha256": "x", "bytes": "many", "frames": 1},
            {"segment_url": "x", "sha256": "x", "bytes": 1, "frames": 1, "passes": {"matte": "x"}},
            {"segment_url": "x", "sha256": "x", "bytes": 1, "frames": 1, "frame_files": [[1, 2]]},
            {"segment_url": "x", "sha256": "x", "bytes": 1, "frames": 1, "qc": 5},
        ]
    ):
        (shot_dir / f"render-{i:05d}.json").write_text(json.dumps({"version": 1, "key": "r", **bad}))
        assert ledger.segment("a", i, RenderKey("r"), home) is None
    (work / "manifest" / "job.json").write_text(json.dumps({"version": 1, "shots": [], "runs": "x"}))
    assert manifest.read_job() is None
    spec = ShotKey("s")
    bad_shot = {
        "version": 1,
        "status": "published",
        "spec_key": spec,
        "output_url": "o",
        "output_fingerprint": 1,
    }
    (shot_dir / "shot.json").write_text(json.dumps(bad_shot))
    assert ledger.published_output("a", spec, "o") is None
    assert len(manifest.take_warnings()) >= 9


def test_resume_fingerprint_mode_is_validated() -> None:
    media = {"plate": "p.mp4", "source": "s.jpg"}
    assert parse_spec(job_spec(media, "out", "j")).resume.fingerprint == "sampled"
    assert (
        parse_spec(job_spec(media, "out", "j", resume={"fingerprint": "full"})).resume.fingerprint == "full"
    )
    with pytest.raises(SpecError) as caught:
        parse_spec(job_spec(media, "out", "j", resume={"fingerprint": "mtime"}))
    assert "resume.fingerprint" in str(caught.value)


@pytest.fixture(scope="module")
def clips(tmp_path_factory) -> tuple[str, str]:
    """Two 3 s clips of the same size and different bytes (another timecode).

    One encode remuxed twice: two separate x264 encodes of the same frames were of different sizes
    on a loaded machine, so the sizes are made equal by construction, not by chance."""
    root = tmp_path_factory.mktemp("swap")
    plate = make_media(str(root))["plate"]
    a = with_timecode(plate, str(root / "a.mp4"), "01:00:00:00")
    b = with_timecode(plate, str(root / "b.mp4"), "02:00:00:00")
    assert os.path.getsize(a) == os.path.getsize(b) and Path(a).read_bytes() != Path(b).read_bytes()
    return a, b


def _cp_p(src: str, dst: str) -> None:
    """``cp -p``: new bytes, the old modification time."""
    stat = os.stat(dst)
    shutil.copyfile(src, dst)
    os.utime(dst, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def test_a_local_plate_replaced_with_cp_p_changes_its_fingerprint(clips, tmp_path) -> None:
    plate = str(tmp_path / "plate.mp4")
    shutil.copyfile(clips[0], plate)
    before = {mode: input_fingerprint(plate, probe(plate), mode) for mode in ("sampled", "full")}
    _cp_p(clips[1], plate)
    info = probe(plate)
    for mode in ("sampled", "full"):
        after = input_fingerprint(plate, info, mode)
        assert after["size"] == before[mode]["size"] and after["mtime"] == before[mode]["mtime"]
        assert after != before[mode], mode


def test_the_sample_reads_at_most_16_mib_and_full_reads_everything(tmp_path) -> None:
    from cluster.state.fingerprints import content_sha256

    big = tmp_path / "big.bin"
    with open(big, "wb") as fh:
        fh.truncate(100 << 20)  # 100 blocks: N = 7, blocks 0, 7, ..., 98 and 99 are read
    sampled, full = content_sha256(str(big), "sampled"), content_sha256(str(big), "full")

    def poke(block: int) -> None:
        with open(big, "r+b") as fh:
            fh.seek(block * (1 << 20) + 5)
            fh.write(b"\x01")

    poke(3)  # between two samples: only the full hash sees it (the documented trade-off)
    assert content_sha256(str(big), "sampled") == sampled and content_sha256(str(big), "full") != full
    poke(7)
    assert content_sha256(str(big), "sampled") != sampled


def test_a_sequence_frame_replaced_with_cp_p_changes_the_fingerprint(tmp_path) -> None:
    pattern = write_sequence(tmp_path / "plates", "sc", count=24)
    before = input_fingerprint(pattern, probe_sequence(pattern, fps=24))
    frame = sorted((tmp_path / "plates").iterdir())[3]
    data = bytearray(frame.read_bytes())
    data[50_000] ^= 0xFF  # one byte of pixels, in the first 64 KiB
    tampered = tmp_path / "tampered.exr"
    tampered.write_bytes(bytes(data))
    _cp_p(str(tampered), str(frame))
    after = input_fingerprint(pattern, probe_sequence(pattern, fps=24))
    assert after["files"] == before["files"]  # numbers, sizes and mtimes: all as they were
    assert after != before


def _bytes_read_by_this_process() -> int:
    """``rchar`` of /proc/self/io: every byte this process's threads have read, from any file."""
    with open("/proc/self/io") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("rchar:"))


def test_sampled_fingerprint_of_a_200_frame_sequence_reads_128_kib_a_frame(tmp_path) -> None:
    """The sampled mode's saving, measured as the bytes the kernel handed over (not as a time, which a busy
    machine turns around): 200 frames of 2 MiB, sampled reads 25 MiB, full reads 400 MiB. The times are
    logged as a FIGURE."""
    from cluster.state.fingerprints import FRAME_SAMPLE_BYTES, frames_sha256

    rng = np.random.default_rng(0)
    urls = []
    for n in range(200):
        path = tmp_path / f"f.{1001 + n}.dpx"
        path.write_bytes(rng.bytes(2 << 20))
        urls.append(str(path))
    read, seconds, digests = {}, {}, {}
    for mode in ("sampled", "full"):
        before, started = _bytes_read_by_this_process(), time.perf_counter()
        digests[mode] = frames_sha256(urls, mode)  # type: ignore[arg-type]
        seconds[mode] = time.perf_counter() - started
        read[mode] = _bytes_read_by_this_process() - before
    logger.warning(
        "FIGURE fingerprint of 200 frames of 2 MiB: sampled %.3f s (%.1f MiB read), full %.3f s (%.1f MiB read)",
        seconds["sampled"], read["sampled"] / 2**20, seconds["full"], read["full"] / 2**20,
    )  # fmt: skip
    sampled_bytes = 200 * 2 * FRAME_SAMPLE_BYTES
    assert sampled_bytes <= read["sampled"] < sampled_bytes + (1 << 20)  # the head and tail of each, no more
    assert read["full"] >= 200 * (2 << 20)
    # What the saving costs: a byte changed in the middle of a frame is seen by the full hash only.
    middle = tmp_path / "f.1100.dpx"
    data = bytearray(middle.read_bytes())
    data[1 << 20] ^= 0xFF
    middle.write_bytes(bytes(data))
    assert frames_sha256(urls, "sampled") == digests["sampled"]
    assert frames_sha256(urls, "full") != digests["full"]


def test_an_s3_source_rewritten_with_the_same_size_changes_its_fingerprint(clips, s3_bucket) -> None:
    fs = fsspec.filesystem("s3")
    url = f"{s3_bucket}/plates/plate.mp4"
    fs.put_file(clips[0], url)
    info = probe(url)
    before = input_fingerprint(url, info)
    assert "content" not in before  # an object store's ETag identifies the bytes: nothing is read
    storage.filesystem(url)[0].ls(f"{s3_bucket}/plates/", detail=True)  # a listing cached in this process
    # Rewritten by another client (an artist's upload): the same size, the same LastModified second likely.
    fsspec.filesystem("s3", skip_instance_cache=True).put_file(clips[1], url)
    after = input_fingerprint(url, info)
    assert after["size"] == before["size"] and after["etag"] != before["etag"]
    assert after != before
