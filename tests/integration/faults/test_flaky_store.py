"""A job whose plate and output live on an object store that fails some requests (:mod:`tests.flaky_s3`).

At a few per cent of 503 SlowDown, dropped connections and stalled reads the job publishes the clean
run's bytes, and its summary counts the retries the proxy caused; when every upload of the output
fails, the job fails in bounded time naming the output, with nothing half-published.
"""

from __future__ import annotations

import hashlib
import time
from typing import Any

import fsspec
import pytest

from cluster.driver import run_job
from cluster.spec.job import parse_spec
from pipeline.store.retries import StorageConfig
from tests.faultjobs import job_spec, make_media
from tests.flaky_s3 import Faults, FlakyS3

pytestmark = [pytest.mark.ray, pytest.mark.slow]

STORAGE = {"retries": 6, "connect_timeout_s": 2, "read_timeout_s": 2, "total_seconds": 60}
"""A read stalled past 2 s is retried; a request failing for a minute gives up."""
GIVE_UP = {"retries": 3, "connect_timeout_s": 1, "read_timeout_s": 2, "total_seconds": 6}
"""An object that keeps failing gives up after 6 s (plus one backoff and one attempt)."""


def _plate_on_s3(bucket: str, root: str) -> dict[str, str]:
    media = make_media(root)
    fs = fsspec.filesystem("s3", skip_instance_cache=True)
    fs.put_file(media["plate"], f"{bucket}/plates/plate.mp4")
    return {"plate": f"{bucket}/plates/plate.mp4", "source": media["source"]}


def _sha256(fs: Any, url: str) -> str:
    return hashlib.sha256(fs.cat_file(url)).hexdigest()


def _leftovers(fs: Any, bucket: str) -> list[str]:
    """Temporary or probe objects anywhere in the bucket."""
    return [k for k in fs.find(bucket, refresh=True) if ".tmp-" in k or "recast-write-check" in k]


def test_a_job_through_a_flaky_store_publishes_the_clean_bytes(
    flaky_ray: FlakyS3, s3_bucket, tmp_path
) -> None:
    media = _plate_on_s3(s3_bucket, str(tmp_path))
    fs = fsspec.filesystem("s3", skip_instance_cache=True)
    started = time.monotonic()
    clean = run_job(parse_spec(job_spec(media, f"{s3_bucket}/clean", "clean", storage=STORAGE)))
    clean_seconds = time.monotonic() - started
    assert clean.ok, clean.table()
    assert clean.storage_retries == 0
    clean_requests = flaky_ray.requests

    flaky_ray.reset_counts()
    flaky_ray.faults = Faults(rate=0.05, stall_seconds=3.0)
    started = time.monotonic()
    flaky = run_job(parse_spec(job_spec(media, f"{s3_bucket}/flaky", "clean", storage=STORAGE)))
    flaky_seconds = time.monotonic() - started
    injected, requests = flaky_ray.injected, flaky_ray.requests
    flaky_ray.faults = Faults()
    print(
        f"\nclean: {clean_seconds:.1f} s, {clean_requests} requests; 5 % faults: {flaky_seconds:.1f} s, "
        f"{requests} requests, injected {dict(injected)}, storage_retries {flaky.storage_retries}"
    )
    assert flaky.ok, flaky.table()
    assert sum(injected.values()) >= 3, injected
    (shot,) = flaky.shots
    # One job id (the watermark carries it), two prefixes: the same rendering, each published whole.
    assert shot.content_sha256 == clean.shots[0].content_sha256
    assert _sha256(fs, f"{s3_bucket}/flaky/plate.mp4") == shot.output_sha256
    assert _sha256(fs, f"{s3_bucket}/clean/plate.mp4") == clean.shots[0].output_sha256
    # Every 503 and stall is retried by botocore or s3fs and counted; a reset may be re-sent by aiohttp
    # itself, unseen (a reused connection dropped before any answer).
    assert injected["slowdown"] + injected["stall"] <= flaky.storage_retries <= sum(injected.values())
    assert _leftovers(fs, s3_bucket) == []


def test_the_planner_actors_requests_are_retried_and_counted(flaky_ray: FlakyS3, s3_bucket, tmp_path) -> None:
    """The tracking records are written by the planner actors, in processes of their own: their failed
    requests are retried as the spec's ``storage:`` says and counted in the job's ``storage_retries``."""
    media = _plate_on_s3(s3_bucket, str(tmp_path))
    flaky_ray.faults = Faults(rate=0.5, kinds=("slowdown",), key="/track-")
    summary = run_job(parse_spec(job_spec(media, f"{s3_bucket}/tracks", "tracks", storage=STORAGE)))
    injected = flaky_ray.injected
    flaky_ray.faults = Faults()
    assert summary.ok, summary.table()
    assert injected["slowdown"] >= 2, injected
    # A 503 always gets an answer, so every one is a retry botocore sends: none is unseen.
    assert summary.storage_retries == injected["slowdown"], (summary.storage_retries, injected)


def test_a_planner_actor_whose_record_cannot_be_written_gives_up_as_the_spec_says(
    flaky_ray: FlakyS3, s3_bucket, tmp_path
) -> None:
    """Every write of one tracking record answered 503: the planner actor gives up on it within the
    spec's ``storage.total_seconds`` (with botocore's defaults it would keep trying for minutes), and
    the job goes on without it (records only spare a resume work): published, every retry counted, the
    record named in the summary's warnings."""
    media = _plate_on_s3(s3_bucket, str(tmp_path))
    flaky_ray.faults = Faults(rate=1.0, kinds=("slowdown",), key="/track-00000", methods=("PUT",))
    started = time.monotonic()
    summary = run_job(parse_spec(job_spec(media, f"{s3_bucket}/stuck", "stuck", storage=GIVE_UP)))
    took = time.monotonic() - started
    injected = flaky_ray.injected
    flaky_ray.faults = Faults()
    assert summary.ok, summary.table()
    (warning,) = [w for w in summary.warnings if "could not record" in w]
    assert "tracking of plate chunk 0" in warning and "track-00000" in warning and "SlowDown" in warning
    # The record's first attempt and each one sent again; the one refused past total_seconds is never sent.
    assert injected["slowdown"] >= GIVE_UP["retries"] + 1, injected
    assert summary.storage_retries == injected["slowdown"] - 1, (summary.storage_retries, injected)
    # The job itself takes ~15-30 s here; the record gives up within the bound (defaults: minutes).
    bound = StorageConfig(**GIVE_UP).longest_failure_seconds
    assert took < 60 + bound, took


def test_an_output_that_cannot_be_uploaded_fails_the_job_in_bounded_time(
    flaky_ray: FlakyS3, s3_bucket, tmp_path
) -> None:
    media = _plate_on_s3(s3_bucket, str(tmp_path))
    fs = fsspec.filesystem("s3", skip_instance_cache=True)
    output = f"{s3_bucket}/failing/plate.mp4"
    flaky_ray.faults = Faults(rate=1.0, key="/failing/plate.mp4", methods=("PUT",))
    started = time.monotonic()
    summary = run_job(parse_spec(job_spec(media, f"{s3_bucket}/failing", "failing", storage=GIVE_UP)))
    took = time.monotonic() - started
    flaky_ray.faults = Faults()
    assert not summary.ok
    (shot,) = summary.shots
    assert shot.status == "failed" and shot.error is not None and output in shot.error, shot.error
    assert "storage.total_seconds" in shot.error and "last error" in shot.error, shot.error
    # The render itself takes ~30-60 s here; each publish attempt gives up within the bound.
    bound = StorageConfig(**GIVE_UP).longest_failure_seconds
    assert took < 120 + 2 * bound, took
    assert not fs.exists(output)
    assert _leftovers(fs, s3_bucket) == []
