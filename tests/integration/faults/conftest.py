"""One plate and one clean render of it for the whole session: every recovered, resumed or taken-over
job of ``test_faults``, ``test_resume_verify`` and ``test_lease_jobs`` must publish the clean
render's bytes, so it is rendered once, not once per module.  ``flaky_ray``: jobs through the flaky
store of :mod:`tests.flaky_s3`."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from cluster.driver import run_job
from cluster.spec.job import parse_spec
from tests.faultjobs import CHUNKS, CLEAN_JOB, job_spec, make_media, sha256_file
from tests.flaky_s3 import FlakyS3
from tests.raytools import SharedRay


@pytest.fixture(scope="session")
def fault_media(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The plate and source picture of the fault tests (:func:`tests.faultjobs.make_media`)."""
    return make_media(str(tmp_path_factory.mktemp("fault-media")))


@pytest.fixture(scope="session")
def clean_reference(
    fault_media: dict[str, str], tmp_path_factory: pytest.TempPathFactory, ray_session: SharedRay
) -> str:
    """sha256 of a clean run's output of ``job_spec(fault_media, ...)`` (on the shared local Ray)."""
    out = str(tmp_path_factory.mktemp("fault-clean"))
    with ray_session.use():
        summary = run_job(parse_spec(job_spec(fault_media, out, CLEAN_JOB)))
    assert summary.ok, summary.table()
    assert summary.shots[0].chunks == CHUNKS and summary.shots[0].faces_swapped > 0
    return sha256_file(os.path.join(out, "plate.mp4"))


@pytest.fixture()
def flaky_ray(flaky_s3: FlakyS3, ray_session: SharedRay) -> Iterator[FlakyS3]:
    """The flaky store (``flaky_s3``) with the shared local Ray started after it, so its actors go through
    the proxy too; Ray is stopped again at the end (the next test starts it with the plain endpoint)."""
    ray_session.stop()
    ray_session.ensure()
    try:
        yield flaky_s3
    finally:
        ray_session.stop()
