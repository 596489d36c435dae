"""The ledger: every manifest read and write of the driver, on a real work area (no Ray)."""

from __future__ import annotations

import hashlib

import numpy as np

from cluster.state.keys import AnalysisKey, RenderKey, TrackKey
from cluster.state.ledger import Ledger
from cluster.state.manifest import JobManifest, RenderRecord, SegmentHome
from pipeline.geometry.types import Face
from pipeline.tracking.tracker import TrackerState, TrackingConfig, track_chunk


def _faces(frames: int) -> list[list[Face]]:
    box = np.array([10, 10, 60, 70], np.float32)
    marks = np.array([[20, 30], [40, 30], [30, 45], [22, 58], [38, 58]], np.float32)
    return [[Face(box + i, marks + i, 0.9, np.ones(4, np.float32) / 2)] for i in range(frames)]


def test_a_fresh_job_reads_nothing_even_where_records_exist(tmp_path) -> None:
    manifest = JobManifest(str(tmp_path / "work"))
    Ledger(manifest, resumed=True).commit_analysis("a", 0, AnalysisKey("k"), _faces(3), "actor-0")
    fresh = Ledger(manifest, resumed=False)
    assert fresh.analysis("a", 0, AnalysisKey("k"), 3) is None
    resumed = Ledger(manifest, resumed=True)
    faces = resumed.analysis("a", 0, AnalysisKey("k"), 3)
    assert faces is not None and len(faces) == 3
    np.testing.assert_array_equal(faces[2][0].box, _faces(3)[2][0].box)
    assert resumed.analysis("a", 0, AnalysisKey("other"), 3) is None  # another key: redo
    assert resumed.analysis("a", 0, AnalysisKey("k"), 4) is None  # another frame count: redo


def test_the_tracker_chain_resumes_up_to_the_first_chunk_tracked_again(tmp_path) -> None:
    manifest = JobManifest(str(tmp_path / "work"))
    writer = Ledger(manifest, resumed=False)
    config = TrackingConfig()
    state: TrackerState | None = None
    for index in range(3):
        state_in = state.to_dict() if state is not None else None
        ids, state = track_chunk(_faces(4), 4 * index, config, state)
        writer.commit_tracking("a", index, TrackKey(f"key{index}"), state_in, state, ids)
    assert writer.records_written == 3

    reader = Ledger(manifest, resumed=True)
    committed = reader.tracking("a", 0, TrackKey("key0"), 4)
    assert committed is not None and committed[0] == [[0], [0], [0], [0]]
    assert reader.tracking("a", 1, TrackKey("changed"), 4) is None  # chunk 1 is tracked again ...
    assert reader.tracking("a", 2, TrackKey("key2"), 4) is None  # ... so chunk 2's state in is stale
    assert Ledger(manifest, resumed=True).tracking("b", 0, TrackKey("key0"), 4) is None  # other shot


def test_a_segment_is_committed_only_when_its_upload_is_whole(tmp_path) -> None:
    manifest = JobManifest(str(tmp_path / "work"))
    ledger = Ledger(manifest, resumed=True)
    segment = tmp_path / "work" / "segments" / "a" / "00000.mkv"
    segment.parent.mkdir(parents=True)
    segment.write_bytes(b"x" * 10)
    sha = hashlib.sha256(b"x" * 10).hexdigest()
    home = SegmentHome(folder=str(segment.parent))
    record = RenderRecord(0, RenderKey("r"), str(segment), sha, 11, 24, 1, "actor-0")
    error = ledger.commit_segment("a", record)
    assert error is not None and "uploaded 10 bytes" in str(error)
    assert ledger.segment("a", 0, RenderKey("r"), home) is None
    assert ledger.commit_segment("a", RenderRecord(0, RenderKey("r"), str(segment), sha, 10, 24, 1)) is None
    assert ledger.segment("a", 0, RenderKey("r"), home) is not None
    segment.unlink()  # deleted once the shot is published: nothing to reuse
    assert ledger.segment("a", 0, RenderKey("r"), home) is None
