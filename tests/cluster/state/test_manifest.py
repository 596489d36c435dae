"""The job manifest: exact round trips, commits that survive only intact, and reuse by key.

Real jobs resubmitted with a changed setting or source are ``tests/integration/jobs/test_manifest_job.py``.
"""

from __future__ import annotations

import hashlib
import json

import numpy as np

from actors.results import ChunkWatermark, FrameFile, SequencePass, VideoPass
from cluster.spec.job import parse_spec
from cluster.spec.shot_refs import ShotRef
from cluster.state.keys import JobKeys
from cluster.state.manifest import (
    JobManifest,
    RenderRecord,
    SegmentHome,
    digest,
    faces_from_npz,
    faces_to_npz,
    tasks_digest,
)
from pipeline.geometry.types import Face, FaceTask
from pipeline.video.chunking import Chunk, ChunkPlan
from pipeline.video.encode import EncoderChoice


def _faces(seed: int) -> list[list[Face]]:
    rng = np.random.default_rng(seed)
    frames = []
    for n in (0, 2, 1, 0, 3):
        frames.append(
            [
                Face(
                    rng.random(4, dtype=np.float32) * 100,
                    rng.random((5, 2), dtype=np.float32) * 100,
                    float(rng.random()),
                    None if i == 1 else rng.standard_normal(128).astype(np.float32),
                )
                for i in range(n)
            ]
        )
    return frames


def test_faces_round_trip_exactly() -> None:
    faces = _faces(0)
    back = faces_from_npz(faces_to_npz(faces))
    assert [len(f) for f in back] == [len(f) for f in faces]
    for a_frame, b_frame in zip(faces, back, strict=True):
        for a, b in zip(a_frame, b_frame, strict=True):
            assert b.box.dtype == a.box.dtype and np.array_equal(a.box, b.box)
            assert np.array_equal(a.landmarks, b.landmarks) and a.score == b.score
            assert (a.embedding is None) == (b.embedding is None)
            if a.embedding is not None:
                assert b.embedding is not None
                assert b.embedding.dtype == np.float32 and np.array_equal(a.embedding, b.embedding)
    assert faces_from_npz(faces_to_npz([[], []])) == [[], []]


def test_digest_is_canonical() -> None:
    assert digest({"a": 1, "b": [1.5, "x"]}) == digest({"b": [1.5, "x"], "a": 1})
    assert digest({"a": np.float32(1.5)}) == digest({"a": 1.5})
    box = np.array([1, 2, 3, 4], np.float32)
    task = FaceTask(3, "hero", box, np.zeros((5, 2), np.float32))
    moved = FaceTask(3, "hero", box + np.float32(1e-3), np.zeros((5, 2), np.float32))
    assert tasks_digest([[task], []]) == tasks_digest([[task], []])
    assert tasks_digest([[task], []]) != tasks_digest([[moved], []])
    # Built directly, it is the general digest of the same tasks (render keys do not change with it).
    generic = [[{"t": 3, "i": "hero", "b": box, "l": np.zeros((5, 2), np.float32), "x": task.extra}], []]
    assert tasks_digest([[task], []]) == digest(generic)
    assert tasks_digest([[task, moved], [moved]]) == digest(
        [
            [{"t": t.track_id, "i": t.identity, "b": t.box, "l": t.landmarks, "x": t.extra} for t in f]
            for f in ([task, moved], [moved])
        ]
    )


def test_records_commit_and_survive_only_intact(tmp_path) -> None:
    manifest = JobManifest(str(tmp_path / "work"))
    assert not manifest.exists()
    manifest.write_job({"job_id": "j"})
    assert manifest.exists() and (manifest.read_job() or {})["job_id"] == "j"

    faces = _faces(1)
    manifest.write_analysis("sc01", 3, "key-a", faces, "actor-0")
    assert len(manifest.read_analysis("sc01", 3, "key-a") or []) == len(faces)
    assert manifest.read_analysis("sc01", 3, "other-key") is None  # stale: redone
    assert manifest.read_analysis("sc01", 4, "key-a") is None  # never committed
    npz = tmp_path / "work" / "manifest" / "sc01" / "analysis-00003.npz"
    npz.write_bytes(npz.read_bytes()[:-10])  # damaged after the commit
    assert manifest.read_analysis("sc01", 3, "key-a") is None

    segment = tmp_path / "work" / "segments" / "sc01" / "00000-abc.mp4"
    segment.parent.mkdir(parents=True)
    segment.write_bytes(b"x" * 100)
    record = RenderRecord(
        0, "key-r", str(segment), hashlib.sha256(b"x" * 100).hexdigest(), 100, 24, 5, "actor-1"
    )
    home = SegmentHome(folder=str(segment.parent))
    manifest.write_render("sc01", record)
    assert manifest.read_render("sc01", 0, "key-r", home) == record
    assert manifest.read_render("sc01", 0, "key-other", home) is None
    segment.write_bytes(b"x" * 50)  # an overwritten, uncommitted upload is not the committed segment
    assert manifest.read_render("sc01", 0, "key-r", home) is None
    segment.unlink()
    assert manifest.read_render("sc01", 0, "key-r", home) is None

    # A torn or foreign record is ignored, not an error.
    (tmp_path / "work" / "manifest" / "sc01" / "render-00001.json").write_text("{not json")
    assert manifest.read_render("sc01", 1, "key-r", home) is None


def test_render_record_json_is_the_manifest_format() -> None:
    """Typed in memory, the stored record keeps its format: passes as [url, bytes, sha256] (video) or
    [pattern, [[number, sha256, bytes], ...]] (image sequence), QC measures and the watermark as dicts."""
    stored = {
        "chunk": 3,
        "key": "k",
        "segment_url": "/out/sh.####.exr",
        "sha256": "a" * 64,
        "bytes": 30,
        "frames": 2,
        "faces_swapped": 2,
        "actor": "actor-1",
        "frame_files": [[1001, "b" * 64, 10], [1002, "c" * 64, 20]],
        "passes": {
            "matte": ["/out/sh_matte.####.exr", [[1001, "d" * 64, 5], [1002, "e" * 64, 6]]],
            "face": ["/work/segments/sh/00003-k.face.mov", 7, "f" * 64],
        },
        "qc": [
            {
                "frame": 4,
                "track": 1,
                "identity": "hero",
                "similarity_after": None,
                "out_grid": [0.5, 0.25],
                "plate_grid": [0.5, 0.125],
                "seam": 1.0,
                "matte": 0.9,
            }
        ],
        "watermark": {"payload": "0badf00d", "step": 32.0, "frames": [[1001, 1002]]},
    }
    record = RenderRecord.from_json(3, "k", stored)
    matte, face = record.passes["matte"], record.passes["face"]
    assert isinstance(matte, SequencePass) and matte.frames[1] == FrameFile(1002, "e" * 64, 6)
    assert isinstance(face, VideoPass) and (face.bytes, face.sha256) == (7, "f" * 64)
    assert record.frame_files[0].number == 1001 and record.qc[0].out_grid == (0.5, 0.25)
    assert record.watermark == ChunkWatermark(payload="0badf00d", step=32.0, frames=((1001, 1002),))
    assert json.loads(json.dumps(record.to_json())) == stored
    assert record.file_sha256() == {
        "/out/sh.####.exr": "a" * 64,
        "/work/segments/sh/00003-k.face.mov": "f" * 64,
    }


def test_keys_change_with_exactly_what_they_depend_on(tmp_path) -> None:
    base = {
        "job_id": "keys",
        "shots": [{"name": "a", "url": "/plates/a.mp4"}],
        "identities": {"hero": {"images": ["/refs/hero.jpg"]}},
        "output": {"url": "/out/{shot}.mp4"},
    }
    spec = parse_spec(base)
    enhanced = parse_spec({**base, "faces": {"mask_blur": 0.2}})
    retracked = parse_spec({**base, "tracking": {"max_gap_frames": 1}})
    fp = {"url": "/plates/a.mp4", "size": 10, "mtime": "1"}
    chunk = Chunk(0, 0, 24)
    plan = ChunkPlan(24, (chunk,))
    ref = ShotRef("a", "/plates/a.mp4", "/out/a.mp4")
    enc = EncoderChoice(name="libx264", pix_fmt="yuv420p", options={}, hardware=False, container="mp4")
    tasks: list = [[] for _ in range(24)]

    def keys(job, pack: str = "pack1", idents: str = "ids") -> JobKeys:
        return JobKeys(job, pack, idents)

    # Analyses depend on the source and the models only.
    analysis = keys(spec).analysis(fp, chunk)
    assert analysis == keys(enhanced).analysis(fp, chunk)
    assert analysis == keys(retracked).analysis(fp, chunk)
    assert analysis != keys(spec, "pack2").analysis(fp, chunk)
    assert analysis != keys(spec).analysis({**fp, "size": 11}, chunk)
    # Tracking on the analysis, the tracking settings and the state coming in.
    track = keys(spec).track(analysis, None)
    assert track != keys(retracked).track(analysis, None)
    assert track != keys(spec).track(analysis, {"next_id": 3})
    assert track == keys(enhanced).track(analysis, None)
    # Renders also on render settings, identities, encoder and the chunk's tasks.
    key = keys(spec).render(fp, chunk, enc, tasks)
    assert key != keys(enhanced).render(fp, chunk, enc, tasks)
    assert key != keys(spec, "pack2").render(fp, chunk, enc, tasks)
    assert key != keys(spec, idents="other-ids").render(fp, chunk, enc, tasks)
    assert key == keys(retracked).render(fp, chunk, enc, tasks)  # same tasks: same segment
    # The whole shot: any of them.
    shot_key = keys(spec).shot(ref, fp, plan)
    assert shot_key != keys(retracked).shot(ref, fp, plan)
    assert shot_key != keys(enhanced).shot(ref, fp, plan)
