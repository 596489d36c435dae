"""Review media and the review playlist obey ``output.if_exists`` where they are written (issue 41):
``overwrite`` (or a resumed job) replaces a file already there; otherwise each is published create-only,
so one that appeared while the job ran is left untouched (a warning for review media and with ``skip``,
a job failure for the playlist with ``fail``).  The merge and the contact sheet are stood in for: what is
tested is the publish."""

from __future__ import annotations

import io
import time
from pathlib import Path

import pytest

from cluster.checks.prepare import prepare_job
from cluster.publish import review as review_module
from cluster.publish.review import ReviewJob, ReviewKept, publish_review
from cluster.report.metrics import JobMetrics
from cluster.report.progress import Progress
from cluster.schedule.observer import JobObserver
from cluster.schedule.reviews import write_reviews
from cluster.spec.job import parse_spec
from cluster.spec.review import IfExistsRule
from jobs.demo_media import make_face_clip, write_source_image
from pipeline.review.frames import ReviewLook
from pipeline.video.merge import MergeStats
from pipeline.video.probe import probe

THEIRS = b"someone else's file, written while the job ran"
MERGED = b"the review movie this job merged"
SHEET = b"the contact sheet this job drew"


@pytest.fixture(scope="module")
def clip(tmp_path_factory) -> str:
    return make_face_clip(
        str(tmp_path_factory.mktemp("review-publish") / "plate.mp4"),
        seconds=1.0,
        width=160,
        height=120,
        gop=12,
    )


def _job(clip: str, folder: Path) -> ReviewJob:
    info = probe(clip)
    movie = folder / "plate_review.mp4"
    return ReviewJob(
        shot="plate",
        look=ReviewLook.of("plate", info.width, info.height, "side_by_side", 1920),
        segment_urls=[],
        segment_sha256=[],
        info=info,
        source_url=clip,
        output_url=clip,
        window=None,
        flags=(),
        movie_url=str(movie),
        contact_url=str(folder / "plate_review_contact.png"),
    )


@pytest.fixture()
def appears(monkeypatch):
    """Stand-ins for the merge and the contact sheet; a file named in ``there`` appears while each runs."""
    there: dict[str, Path] = {}
    merged: list[str] = []

    def merge(segment_urls, info, out, **kwargs) -> MergeStats:
        merged.append(out)
        Path(out).write_bytes(MERGED)
        if "movie" in there:
            there["movie"].write_bytes(THEIRS)
        return MergeStats(frames=info.frame_count, bytes=len(MERGED), seconds=0.0)

    def contact(job: ReviewJob) -> bytes:
        if "contact" in there:
            there["contact"].write_bytes(THEIRS)
        return SHEET

    monkeypatch.setattr("pipeline.video.merge.merge_segments", merge)
    monkeypatch.setattr(review_module, "_contact", contact)
    return there, merged


@pytest.mark.parametrize("if_exists", ["fail", "skip"])
def test_a_review_movie_that_appears_meanwhile_is_left_untouched(clip, tmp_path, appears, if_exists) -> None:
    there, _ = appears
    job = _job(clip, tmp_path)
    there["movie"] = Path(job.movie_url)
    with pytest.raises(ReviewKept) as kept:
        publish_review(job, writes=IfExistsRule(if_exists=if_exists, resumed=False))
    assert job.movie_url in str(kept.value) and "output.review.url" in str(kept.value)
    assert Path(job.movie_url).read_bytes() == THEIRS
    assert not Path(job.contact_url).exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plate_review.mp4"]  # no temporary left


def test_a_contact_sheet_that_appears_meanwhile_is_left_untouched(clip, tmp_path, appears) -> None:
    there, _ = appears
    job = _job(clip, tmp_path)
    there["contact"] = Path(job.contact_url)
    with pytest.raises(ReviewKept, match="appeared after the job's checks; with output.if_exists: fail"):
        publish_review(job, writes=IfExistsRule(if_exists="fail", resumed=False))
    assert Path(job.contact_url).read_bytes() == THEIRS
    assert Path(job.movie_url).read_bytes() == MERGED


def test_skip_leaves_review_media_already_there_without_merging(clip, tmp_path, appears) -> None:
    _, merged = appears
    job = _job(clip, tmp_path)
    Path(job.contact_url).write_bytes(THEIRS)
    with pytest.raises(ReviewKept, match=r"exists: left as it is \(if_exists: skip\)"):
        publish_review(job, writes=IfExistsRule(if_exists="skip", resumed=False))
    assert not merged and not Path(job.movie_url).exists()
    assert Path(job.contact_url).read_bytes() == THEIRS


@pytest.mark.parametrize(
    "rule",
    [IfExistsRule(if_exists="overwrite", resumed=False), IfExistsRule(if_exists="fail", resumed=True)],
    ids=["overwrite", "resumed"],
)
def test_overwrite_or_a_resumed_job_replaces_review_media(clip, tmp_path, appears, rule) -> None:
    job = _job(clip, tmp_path)
    Path(job.movie_url).write_bytes(THEIRS)
    Path(job.contact_url).write_bytes(THEIRS)
    made = publish_review(job, writes=rule)
    assert made.movie_url == job.movie_url and made.frames == job.info.frame_count
    assert Path(job.movie_url).read_bytes() == MERGED
    assert Path(job.contact_url).read_bytes() == SHEET


def _prepared_with_playlist(clip: str, tmp_path: Path, if_exists: str):
    spec = parse_spec(
        {
            "job_id": "dailies",
            "shots": [{"name": "plate", "url": clip}],
            "identities": {"hero": {"images": [write_source_image(str(tmp_path / "source.jpg"))]}},
            "output": {
                "url": str(tmp_path / "out" / "{shot}.mp4"),
                "if_exists": if_exists,
                "review": {"url": str(tmp_path / "review" / "{shot}.mp4")},
                "review_timeline_url": str(tmp_path / "review" / "dailies.otio"),
            },
        }
    )
    prepared = prepare_job(spec, resume=False)
    observer = JobObserver(
        prepared,
        started=time.perf_counter(),
        progress=Progress({"plate": 24}, stream=io.StringIO()),
        metrics=JobMetrics("dailies"),
        thumbnails=False,
    )
    return prepared, observer, tmp_path / "review" / "dailies.otio"


@pytest.mark.parametrize("if_exists", ["fail", "skip", "overwrite"])
def test_a_review_playlist_that_appears_meanwhile(clip, tmp_path, if_exists, no_ray) -> None:
    prepared, observer, playlist = _prepared_with_playlist(clip, tmp_path, if_exists)
    playlist.parent.mkdir()
    playlist.write_bytes(THEIRS)  # after the checks, before the playlist is written
    write_reviews(prepared, observer, {})
    summary = observer.summary
    if if_exists == "overwrite":
        assert playlist.read_bytes() != THEIRS and summary.review_timeline_url == str(playlist)
        assert not summary.failures and not summary.warnings
        return
    assert playlist.read_bytes() == THEIRS and summary.review_timeline_url is None
    if if_exists == "fail":
        expected = (
            f"{playlist} (output.review_timeline_url) appeared after the job's checks; "
            "with output.if_exists: fail it is left untouched, not overwritten"
        )
        assert summary.failures == [expected]
        assert not summary.warnings
    else:
        assert summary.warnings == [
            f"{playlist} (output.review_timeline_url) exists: left as it is (if_exists: skip)"
        ]
        assert not summary.failures
