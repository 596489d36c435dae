"""Compacted shot records (cluster.state.compact): a resume reads the same, trusts the same, on disk and S3.

Real work areas, on the local disk and on the loopback S3 store: a resume from a
compacted manifest gives exactly what one from the per-chunk records gives; a
compacted copy that was edited or is unsigned is distrusted (the same warning) and the
file itself is read; a record written after the compaction wins.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import numpy as np
import pytest

from cluster.state.compact import COMPACT_NAME, pack, unpack
from cluster.state.keys import AnalysisKey, RenderKey, TrackKey
from cluster.state.ledger import Ledger
from cluster.state.manifest import JobManifest, RenderRecord, SegmentHome
from cluster.state.manifest_sign import MANIFEST_KEY_ENV, manifest_key
from pipeline.geometry.types import Face
from pipeline.store import jsonload, storage
from pipeline.tracking.tracker import TrackingConfig, track_chunk

KEY = manifest_key({MANIFEST_KEY_ENV: "k3y-that-is-long-enough-0123456789"})
CHUNKS, FRAMES = 3, 4


@pytest.fixture(params=["local", "s3"])
def work(request, tmp_path) -> str:
    if request.param == "local":
        return str(tmp_path / "work")
    return f"{request.getfixturevalue('s3_bucket')}/work"


def _faces(seed: int) -> list[list[Face]]:
    rng = np.random.default_rng(seed)
    box = np.array([10, 10, 60, 70], np.float32)
    marks = np.array([[20, 30], [40, 30], [30, 45], [22, 58], [38, 58]], np.float32)
    return [
        [Face(box + i, marks + i, 0.9, rng.random(8, dtype=np.float32)) for _ in range(i % 3)]
        for i in range(FRAMES)
    ]


def _write_job(work: str) -> None:
    writer = Ledger(JobManifest(work, KEY), resumed=False)
    state = None
    for i in range(CHUNKS):
        writer.commit_analysis("a", i, AnalysisKey(f"k{i}"), _faces(i), "actor-0")
        ids, out = track_chunk(_faces(i), i * FRAMES, TrackingConfig(), state)
        writer.commit_tracking(
            "a", i, TrackKey(f"t{i}"), None if state is None else state.to_dict(), out, ids
        )
        state = out
        url = storage.join(work, "segments", "a", f"{i:05d}-r.mkv")
        data = f"segment {i}".encode()
        storage.write_bytes(url, data)
        record = RenderRecord(
            i, RenderKey(f"r{i}"), url, hashlib.sha256(data).hexdigest(), len(data), FRAMES, 1, "x"
        )
        assert writer.commit_segment("a", record) is None


def _resume(work: str, *, prefetch: bool = True) -> tuple[dict[str, Any], list[str]]:
    manifest = JobManifest(work, KEY)
    ledger = Ledger(manifest, resumed=True)
    if prefetch:
        ledger.prefetch(["a"])
    home = SegmentHome(folder=storage.join(work, "segments", "a"))
    out: dict[str, Any] = {}
    for i in range(CHUNKS):
        faces = ledger.analysis("a", i, AnalysisKey(f"k{i}"), FRAMES)
        out[f"analysis {i}"] = (
            None
            if faces is None
            else [
                [(f.box.tolist(), f.landmarks.tolist(), f.score, f.embedding.tolist()) for f in fr]
                for fr in faces
            ]
        )
        tracked = ledger.tracking("a", i, TrackKey(f"t{i}"), FRAMES)
        out[f"track {i}"] = None if tracked is None else (tracked[0], tracked[1].to_dict())
        out[f"render {i}"] = ledger.segment("a", i, RenderKey(f"r{i}"), home)
    return out, manifest.take_warnings()


def _rewrite_compact(work: str, change) -> None:
    url = storage.join(work, "manifest", "a", COMPACT_NAME)
    members = unpack("a", storage.read_bytes(url))
    files = {name: (stamp, bytes(data)) for name, (stamp, data) in members.items()}
    change(files)
    storage.write_bytes(url, pack("a", files))


def test_a_compacted_shot_resumes_exactly_as_its_files(work) -> None:
    _write_job(work)
    before, warnings = _resume(work, prefetch=False)
    assert not warnings and all(v is not None for v in before.values())
    assert JobManifest(work, KEY).compact_shot("a") == 4 * CHUNKS
    assert len(JobManifest(work, KEY)._shot_folders().get("a").compacted) == 4 * CHUNKS  # used
    after, warnings = _resume(work)
    assert after == before and not warnings
    assert _resume(work, prefetch=False)[0] == before


def test_an_edited_or_unsigned_compacted_copy_is_distrusted_and_the_file_read(work) -> None:
    _write_job(work)
    expected, _ = _resume(work)
    JobManifest(work, KEY).compact_shot("a")

    def tamper(files: dict[str, tuple[str, bytes]]) -> None:
        stamp, data = files["analysis-00000.json"]
        files["analysis-00000.json"] = (stamp, data.replace(b'"actor-0"', b'"actor-9"'))  # old mac kept
        stamp, data = files["track-00001.json"]
        record = jsonload.loads(data)
        del record["mac"]  # unsigned
        files["track-00001.json"] = (stamp, json.dumps(record).encode())
        stamp, data = files["analysis-00002.npz"]
        files["analysis-00002.npz"] = (stamp, data[:-8] + b"\0" * 8)  # not the npz its record names

    _rewrite_compact(work, tamper)
    got, warnings = _resume(work)
    assert got == expected  # the files themselves were read
    (warning,) = warnings
    assert warning.startswith("2 manifest record(s) were unsigned or not signed with RECAST_MANIFEST_KEY")


def test_a_record_written_after_the_compaction_wins(work) -> None:
    _write_job(work)
    JobManifest(work, KEY).compact_shot("a")
    Ledger(JobManifest(work, KEY), resumed=False).commit_analysis(
        "a", 1, AnalysisKey("k1-new"), _faces(7), "y"
    )
    ledger = Ledger(JobManifest(work, KEY), resumed=True)
    ledger.prefetch(["a"])
    assert ledger.analysis("a", 1, AnalysisKey("k1"), FRAMES) is None
    faces = Ledger(JobManifest(work, KEY), resumed=True).analysis("a", 1, AnalysisKey("k1-new"), FRAMES)
    assert faces is not None
    assert [[f.embedding.tolist() for f in fr] for fr in faces] == [
        [f.embedding.tolist() for f in fr] for fr in _faces(7)
    ]
    assert ledger.analysis("a", 0, AnalysisKey("k0"), FRAMES) is not None  # still from the compacted copy
    # A record removed since the compaction is absent (its work is redone), as without compaction.
    storage.remove(storage.join(work, "manifest", "a", "track-00002.json"))
    assert Ledger(JobManifest(work, KEY), resumed=True).tracking("a", 2, TrackKey("t2"), FRAMES) is None
    # Compacting again takes the new record.
    JobManifest(work, KEY).compact_shot("a")
    assert Ledger(JobManifest(work, KEY), resumed=True).analysis("a", 1, AnalysisKey("k1-new"), FRAMES)


def test_a_manifest_pickles_and_reads_on_after(tmp_path) -> None:
    import pickle

    work = str(tmp_path / "work")
    _write_job(work)
    manifest = JobManifest(work, KEY)
    manifest.compact_shot("a")
    manifest.prefetch(["a"])
    assert Ledger(manifest, resumed=True).analysis("a", 0, AnalysisKey("k0"), FRAMES) is not None
    copy = pickle.loads(pickle.dumps(manifest))
    assert Ledger(copy, resumed=True).analysis("a", 2, AnalysisKey("k2"), FRAMES) is not None
    manifest.close()
