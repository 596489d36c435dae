"""A full disk: the work area on a small tmpfs that fills mid-job (root or CAP_SYS_ADMIN; else skipped).

A clean run of ``job_spec`` holds at most 628 KiB in its work area while it renders (the three
segments, their records, the analyses); the tmpfs here holds about half of that, so the first
segments are committed and a later one finds the filesystem full.  The job then stops with a job
failure naming the path and "no space left on device", publishes nothing and leaves no temporary
file; once the tmpfs is made larger the same spec resumes from what was committed and publishes the
clean run's bytes.  The storage layer's part is checked without Ray first.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cluster.driver import JobRunner
from cluster.spec.job import parse_spec
from pipeline.errors import StorageError
from pipeline.store import storage
from tests.faultjobs import (
    CHUNKS,
    CLEAN_JOB,
    finish,
    job_spec,
    records,
    run_in_thread,
    sha256_file,
    tmp_files,
)
from tests.tmpfs import resize, small_tmpfs

logger = logging.getLogger(__name__)

SMALL = "320k"
"""About half of the 628 KiB a clean run's work area holds at its fullest (measured while it renders)."""
ROOMY = "8m"
"""Space freed: more than a whole run needs (1.2 MiB with its final report)."""
FAILS_WITHIN_SECONDS = 120.0


@pytest.fixture()
def full_fs(tmp_path: Path) -> Iterator[Path]:
    """A :data:`SMALL` tmpfs, unmounted at the end whatever happens."""
    with small_tmpfs(tmp_path / "small-fs", SMALL) as folder:
        yield folder


# -- the storage layer, without Ray ---------------------------------------------------------------


@pytest.mark.parametrize("overwrite", [True, False])
def test_publish_onto_a_full_filesystem(full_fs: Path, tmp_path: Path, overwrite: bool) -> None:
    """A segment larger than the space left: a StorageError naming it, nothing there, no temporary file."""
    src = tmp_path / "segment.mp4"
    src.write_bytes(os.urandom(400 * 1024))
    url = str(full_fs / "segments" / "plate" / "00000-abc.mp4")
    with pytest.raises(StorageError) as err:
        storage.publish_file(src, url, overwrite=overwrite)
    assert err.value.url == url and err.value.reason == storage.NO_SPACE, err.value
    assert storage.no_space(err.value)
    assert str(err.value) == f"{url}: no space left on device"
    assert not os.path.exists(url)
    assert not tmp_files(str(full_fs))


def test_write_bytes_onto_a_full_filesystem(full_fs: Path) -> None:
    """What fits is written; the next write that does not is refused whole and leaves no temporary file."""
    first = str(full_fs / "manifest" / "first.json")
    storage.write_bytes(first, b"x" * (200 * 1024))
    second = str(full_fs / "manifest" / "second.json")
    with pytest.raises(StorageError) as err:
        storage.write_bytes(second, b"y" * (200 * 1024), overwrite=False)
    assert err.value.url == second and storage.no_space(err.value), err.value
    # Replacing the first one needs room for its new copy beside it: refused, the old one kept whole.
    with pytest.raises(StorageError) as again:
        storage.write_bytes(first, b"z" * (200 * 1024))
    assert again.value.url == first and storage.no_space(again.value), again.value
    assert Path(first).read_bytes() == b"x" * (200 * 1024)
    assert not os.path.exists(second)
    assert not tmp_files(str(full_fs))


def test_no_space_is_only_a_full_filesystem() -> None:
    assert not storage.no_space(StorageError("/w/x", "permission denied"))
    assert not storage.no_space(OSError(28, "No space left on device"))  # not translated yet
    assert storage.no_space(StorageError("/w/x", f"{storage.NO_SPACE} (disk quota exceeded)"))


# -- a job -----------------------------------------------------------------------------------------


@pytest.mark.ray
@pytest.mark.slow
def test_full_work_area_stops_the_job_and_the_resubmission_resumes(
    fault_media, clean_reference, tmp_path, ray_session, full_fs
) -> None:
    out = str(tmp_path / "out")
    work = str(full_fs / "work")
    data = job_spec(fault_media, out, CLEAN_JOB)
    data["output"] = {**data["output"], "work_url": work}
    with ray_session.use():
        runner = JobRunner(parse_spec(data))
        started = time.monotonic()
        thread, result = run_in_thread(runner, "full-disk-job")
        summary = finish(thread, result, timeout=FAILS_WITHIN_SECONDS + 60)
        failed_after = time.monotonic() - started
    assert failed_after < FAILS_WITHIN_SECONDS
    assert not summary.ok
    # A job failure naming the full path, and the shot's own error naming the segment it could not write.
    (failure,) = summary.failures
    assert failure.startswith(f"the work area is full ({work}/") and "no space left on device" in failure
    assert f"free space in {work} (output.work_url) and resubmit" in failure, failure
    (shot,) = summary.shots
    assert shot.status == "failed", summary.table()
    assert f"{work}/" in str(shot.error) and "no space left on device" in str(shot.error), shot.error
    # A full disk is not tried again chunk by chunk: the job stops at the first one.
    assert sum(runner.shot_retries.values()) == 0, runner.timeline
    # Nothing published, no temporary file in the output folder or the work area.
    assert not [str(p) for p in Path(out).rglob("*") if p.is_file()]
    assert not tmp_files(str(tmp_path))
    # What was committed is whole: every recorded segment has its recorded bytes.
    analysed, rendered = records(work, "plate", "analysis"), records(work, "plate", "render")
    assert len(analysed) == CHUNKS and len(rendered) < CHUNKS
    for record in rendered.values():
        assert sha256_file(record["segment_url"]) == record["sha256"]

    resize(full_fs, ROOMY)  # space freed
    with ray_session.use():
        started = time.monotonic()
        resumed = JobRunner(parse_spec(data)).run()
        resumed_after = time.monotonic() - started
    assert resumed.ok, resumed.table()
    (shot,) = resumed.shots
    assert shot.status == "published"
    assert shot.analyses_reused == CHUNKS and shot.analyses_run == 0
    assert shot.chunks_reused == len(rendered) and shot.chunks_rendered == CHUNKS - len(rendered)
    assert sha256_file(os.path.join(out, "plate.mp4")) == clean_reference
    assert not tmp_files(str(tmp_path))
    logger.warning(
        "FIGURE full disk (%s tmpfs): failed after %.1f s with %d/%d chunks committed; resumed in %.1f s",
        SMALL, failed_after, len(rendered), CHUNKS, resumed_after,
    )  # fmt: skip


@pytest.mark.ray
@pytest.mark.slow
def test_full_work_area_stops_every_shot(fault_media, tmp_path, ray_session, full_fs) -> None:
    """Two shots: the first full write fails the job; the other shot is not rendered chunk by chunk into
    the full disk (each chunk failing twice) but stopped, saying why."""
    out = str(tmp_path / "out")
    data = job_spec(fault_media, out, "full-disk-shots")
    data["shots"] = [{"name": name, "url": fault_media["plate"]} for name in ("a", "b")]
    data["output"] = {**data["output"], "work_url": str(full_fs / "work")}
    with ray_session.use():
        runner = JobRunner(parse_spec(data))
        summary = finish(*run_in_thread(runner, "full-disk-shots"), timeout=FAILS_WITHIN_SECONDS)
    assert not summary.ok and len(summary.failures) == 1, summary.failures
    assert [s.status for s in summary.shots] == ["failed", "failed"], summary.table()
    for shot in summary.shots:
        assert "no space left on device" in str(shot.error), shot.error
    assert sum(runner.shot_retries.values()) == 0, runner.timeline
    assert not [str(p) for p in Path(out).rglob("*") if p.is_file()]
    assert not tmp_files(str(tmp_path))
