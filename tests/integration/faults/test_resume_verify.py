"""A resumed job on real Ray publishes only what it verified.

Each test first runs the job with its merge failing (every chunk rendered and
committed, the segments kept, nothing published), then changes the work area
as a careless or hostile user could, and resubmits: the chunks whose segment or
record cannot be trusted are rendered again, the output equals a clean run's
byte for byte, and the summary says what was set aside.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from cluster.driver import DriverParts, JobRunner, run_job
from cluster.publish.merge import merge_and_publish
from cluster.spec.job import parse_spec
from cluster.state.manifest_sign import MANIFEST_KEY_ENV
from pipeline.errors import MediaError
from tests.clips import with_timecode
from tests.faultjobs import CHUNKS, CLEAN_JOB, job_spec, records, sha256_file

pytestmark = [pytest.mark.ray, pytest.mark.slow]
KEY = "a-manifest-key-of-32-characters!"


def _failing_merge(*args: Any, **kwargs: Any) -> Any:
    raise MediaError("merge", "merge switched off by the test")


def _rendered_not_published(fault_media: dict[str, str], out: str, job_id: str) -> str:
    """Run the job with its merge failing: every chunk committed, segments kept; returns the work area."""
    summary = JobRunner(
        parse_spec(job_spec(fault_media, out, job_id)), parts=DriverParts(merge=_failing_merge)
    ).run()
    (shot,) = summary.shots
    assert shot.status == "failed" and shot.chunks_rendered == CHUNKS
    work = os.path.join(out, ".recast-work", job_id)
    assert len(records(work, "plate", "render")) == CHUNKS
    assert not os.path.exists(os.path.join(out, "plate.mp4"))
    return work


def _flip_bytes(path: str) -> None:
    """Other bytes, the same size (the middle of the segment: its frames)."""
    data = bytearray(Path(path).read_bytes())
    middle = len(data) // 2
    data[middle : middle + 64] = bytes(b ^ 0x5A for b in data[middle : middle + 64])
    Path(path).write_bytes(bytes(data))


def _record_path(work: str, kind: str, chunk: int) -> Path:
    return Path(work, "manifest", "plate", f"{kind}-{chunk:05d}.json")


def test_changed_misplaced_and_foreign_records_are_redone_and_output_identical(
    fault_media, clean_reference, tmp_path, ray_local
) -> None:
    out = str(tmp_path / "out")
    work = _rendered_not_published(fault_media, out, CLEAN_JOB)
    rendered = records(work, "plate", "render")
    # Chunk 0: its segment rewritten with other bytes of the same size.
    _flip_bytes(rendered[0]["segment_url"])
    # Chunk 1: its record points outside the work area, at a file with the right size and sha256.
    outside = str(tmp_path / "outside.mp4")
    shutil.copyfile(rendered[1]["segment_url"], outside)
    data = json.loads(_record_path(work, "render", 1).read_text())
    _record_path(work, "render", 1).write_text(json.dumps(data | {"segment_url": outside}))
    # Chunk 2: its track record in a foreign format (its segment is intact).
    _record_path(work, "track", 2).write_text(json.dumps({"version": 1, "chunk": 2, "key": "x", "ids": 5}))
    track = json.loads(_record_path(work, "track", 1).read_text())
    _record_path(work, "track", 1).write_text(json.dumps(track | {"track_ids": "garbage", "state_out": []}))

    # And chunk 2's segment changed after the resumed job checked it: caught while fetched for the merge.
    merges: list[list[str]] = []

    def merge_changing_a_segment(segment_urls: list[str], *args: Any, **kwargs: Any) -> Any:
        merges.append(list(segment_urls))
        if len(merges) == 1:
            _flip_bytes(segment_urls[2])
        return merge_and_publish(segment_urls, *args, **kwargs)

    summary = JobRunner(
        parse_spec(job_spec(fault_media, out, CLEAN_JOB)), parts=DriverParts(merge=merge_changing_a_segment)
    ).run()
    (shot,) = summary.shots
    assert shot.status == "published", summary.table()
    assert sha256_file(os.path.join(out, "plate.mp4")) == clean_reference
    assert (shot.chunks_rendered, shot.chunks_reused, shot.analyses_reused) == (3, 0, CHUNKS)
    assert len(merges) == 2  # merged once more after chunk 2 was rendered again
    warnings = "\n".join(summary.warnings)
    assert (
        f"plate chunk 0: segment {rendered[0]['segment_url']} does not match its recorded sha256" in warnings
    )
    assert f"plate chunk 1: the record's segment {outside} is not in this job's segments" in warnings
    assert "plate chunk 1: track record is stale" in warnings
    assert (
        f"plate chunk 2: segment {rendered[2]['segment_url']} does not match its recorded sha256" in warnings
    )
    assert Path(outside).exists()  # never touched


def test_with_a_manifest_key_edited_and_unsigned_records_are_not_trusted(
    fault_media, clean_reference, tmp_path, ray_local, monkeypatch
) -> None:
    monkeypatch.setenv(MANIFEST_KEY_ENV, KEY)
    out = str(tmp_path / "out")
    work = _rendered_not_published(fault_media, out, CLEAN_JOB)
    for path in Path(work, "manifest").rglob("*.json"):
        assert "mac" in json.loads(path.read_text()), path
    # Chunk 1's render record edited (its old mac kept); chunk 0's analysis record without its mac.
    data = json.loads(_record_path(work, "render", 1).read_text())
    _record_path(work, "render", 1).write_text(json.dumps(data | {"faces_swapped": 999}))
    data = json.loads(_record_path(work, "analysis", 0).read_text())
    del data["mac"]
    _record_path(work, "analysis", 0).write_text(json.dumps(data))

    summary_path = tmp_path / "summary.json"
    summary = run_job(parse_spec(job_spec(fault_media, out, CLEAN_JOB)))
    summary_path.write_text(json.dumps(summary.to_dict()))
    (shot,) = summary.shots
    assert shot.status == "published", summary.table()
    assert sha256_file(os.path.join(out, "plate.mp4")) == clean_reference
    assert (shot.analyses_run, shot.analyses_reused) == (1, CHUNKS - 1)
    assert (shot.chunks_rendered, shot.chunks_reused) == (1, CHUNKS - 1)
    (warning,) = [w for w in summary.warnings if "RECAST_MANIFEST_KEY" in w]
    assert warning.startswith("2 manifest record(s) were unsigned or not signed")
    # The key is nowhere in what the job wrote.
    for path in [*Path(out).rglob("*"), summary_path]:
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path


def test_a_plate_replaced_with_cp_p_is_analysed_again(fault_media, tmp_path, ray_local) -> None:
    out = str(tmp_path / "out")
    plate = with_timecode(fault_media["plate"], str(tmp_path / "plate.mp4"), "01:00:00:00")
    other = with_timecode(fault_media["plate"], str(tmp_path / "other.mp4"), "02:00:00:00")
    assert os.path.getsize(other) == os.path.getsize(plate)
    output = {"url": os.path.join(out, "{shot}.mp4"), "preset": "ultrafast", "if_exists": "overwrite"}
    spec = parse_spec(
        job_spec(fault_media, out, "swap", shots=[{"name": "plate", "url": plate}], output=output)
    )
    first = run_job(spec)
    assert first.ok and first.shots[0].analyses_run == CHUNKS
    published = sha256_file(os.path.join(out, "plate.mp4"))
    stat = os.stat(plate)
    shutil.copyfile(other, plate)  # cp -p: the bytes change, size and mtime do not
    os.utime(plate, ns=(stat.st_atime_ns, stat.st_mtime_ns))

    second = run_job(spec)
    (shot,) = second.shots
    assert shot.status == "published" and not shot.reused
    assert (shot.analyses_run, shot.analyses_reused, shot.chunks_rendered) == (CHUNKS, 0, CHUNKS)
    assert sha256_file(os.path.join(out, "plate.mp4")) != published  # the new plate's timecode
