"""Object-store retries (:mod:`pipeline.store.retries`) without Ray: the ``storage:`` settings, and reads and
writes through a proxy that fails some requests (:mod:`tests.flaky_s3`): the right bytes, retries counted,
and an object that keeps failing refused in bounded time, naming it, with nothing written."""

from __future__ import annotations

import os
import time

import pytest

from cluster.schedule.actor_config import render_config
from cluster.schedule.pool import plan_pool
from cluster.spec.job import parse_spec
from pipeline.errors import SpecError, StorageError
from pipeline.store import storage
from pipeline.store.retries import StorageConfig
from tests.flaky_s3 import Faults, FlakyS3

QUICK = StorageConfig(retries=4, connect_timeout_s=1, read_timeout_s=1, total_seconds=4)
"""Short timeouts: a stalled read fails after 1 s, an object that keeps failing gives up after ~4 s."""
PATIENT = StorageConfig(retries=8, connect_timeout_s=1, read_timeout_s=1, total_seconds=60)
"""The same timeouts, time enough for a run of failed attempts (30 % of requests fail)."""


def _spec(**extra: object) -> dict:
    return {
        "job_id": "retries",
        "shots": [{"name": "a", "url": "/tmp/a.mp4"}],
        "identities": {"hero": {"images": ["/tmp/hero.jpg"]}},
        "output": {"url": "/tmp/out/{shot}.mp4"},
        **extra,
    }


def test_the_settings_become_botocore_retry_options() -> None:
    options = StorageConfig(retries=3, mode="adaptive", connect_timeout_s=2, read_timeout_s=7).s3_options()
    assert options == {
        "config_kwargs": {
            "retries": {"mode": "adaptive", "total_max_attempts": 4},
            "connect_timeout": 2,
            "read_timeout": 7,
        }
    }
    default = StorageConfig()
    assert (default.retries, default.mode, default.total_seconds) == (8, "standard", 600)
    assert default.longest_failure_seconds == 600 + 20 + 5 + 20


@pytest.mark.parametrize(
    ("storage_block", "field", "words"),
    [
        ({"retries": 50}, "storage.retries", "less than or equal to 20"),
        ({"mode": "legacy"}, "storage.mode", "'standard' or 'adaptive'"),
        ({"read_timeout_s": 0}, "storage.read_timeout_s", "greater than 0"),
        ({"total_seconds": 10, "read_timeout_s": 20}, "storage", "room for one attempt"),
        ({"retry": 3}, "storage.retry", "unknown key"),
    ],
)
def test_the_spec_refuses_bad_storage_settings(storage_block: dict, field: str, words: str) -> None:
    with pytest.raises(SpecError) as info:
        parse_spec(_spec(storage=storage_block))
    assert info.value.field == field and words in info.value.reason, info.value


def test_actors_get_the_spec_storage_settings() -> None:
    spec = parse_spec(_spec(storage={"retries": 2, "total_seconds": 60}))
    assert spec.storage == StorageConfig(retries=2, total_seconds=60)
    plan = plan_pool({"CPU": 2.0}, gpus_per_actor=None, cpus_per_actor=1, max_actors=1, work_items=1)
    assert render_config(spec, plan).storage == spec.storage
    assert parse_spec(_spec()).storage == StorageConfig()


def test_configure_hands_every_s3_filesystem_the_settings(s3_endpoint: str) -> None:
    client = storage.configure(QUICK)
    try:
        fs, _ = storage.filesystem("s3://any-bucket/key")
        assert fs.session is client.session and fs.retries == QUICK.retries + 1
        assert fs.config_kwargs["retries"] == {"mode": "standard", "total_max_attempts": 5}
        assert storage.configure(QUICK) is client  # the same settings keep the client and its count
        assert storage.store_client() is client
    finally:
        storage.configure(StorageConfig())


def _roundtrip(bucket: str, count: int, data: bytes) -> None:
    for i in range(count):
        url = f"{bucket}/obj-{i}.bin"
        storage.write_bytes(url, data, overwrite=False)
        assert storage.read_bytes(url) == data
        with storage.open_read(url) as fh:
            assert fh.read() == data
        with storage.fetched(url) as path, open(path, "rb") as fh:
            assert fh.read() == data


def test_slowdowns_are_retried_and_counted_one_for_one(flaky_s3: FlakyS3, s3_bucket: str) -> None:
    client = storage.configure(PATIENT)
    flaky_s3.faults = Faults(rate=0.25, kinds=("slowdown",))
    before = client.retries
    _roundtrip(s3_bucket, 2, os.urandom(200_000))
    injected = flaky_s3.injected["slowdown"]
    assert injected >= 2, flaky_s3.injected
    assert client.retries - before == injected


@pytest.mark.parametrize("kind", ["reset", "stall"])
def test_a_body_cut_or_stalled_mid_transfer_is_read_again(
    flaky_s3: FlakyS3, s3_bucket: str, kind: str
) -> None:
    client = storage.configure(PATIENT)
    data = os.urandom(300_000)
    storage.write_bytes(f"{s3_bucket}/body.bin", data)
    flaky_s3.faults = Faults(rate=0.5, kinds=(kind,), methods=("GET",), stall_seconds=2.0)
    before = client.retries
    for _ in range(3):
        assert storage.read_bytes(f"{s3_bucket}/body.bin") == data
        with storage.fetched(f"{s3_bucket}/body.bin") as path, open(path, "rb") as fh:
            assert fh.read() == data
    assert flaky_s3.injected[kind] > 0
    # A reset on a reused connection may be sent again by aiohttp itself, unseen: at most as many.
    assert 0 < client.retries - before <= flaky_s3.injected[kind]


def test_an_object_that_keeps_failing_is_refused_in_bounded_time(
    flaky_s3: FlakyS3, s3_bucket: str, tmp_path
) -> None:
    storage.configure(QUICK)
    local = tmp_path / "out.bin"
    local.write_bytes(os.urandom(100_000))
    url = f"{s3_bucket}/deliveries/out.bin"
    flaky_s3.faults = Faults(rate=1.0, key="deliveries/out.bin", methods=("PUT",))
    started = time.monotonic()
    with pytest.raises(StorageError) as info:
        storage.publish_file(local, url, overwrite=False)
    took = time.monotonic() - started
    assert info.value.url == url
    assert "storage.total_seconds" in info.value.reason and "last error" in info.value.reason, info.value
    assert QUICK.total_seconds <= took <= QUICK.longest_failure_seconds, took
    flaky_s3.faults = Faults()
    assert not storage.exists(url)
    assert storage.listdir(s3_bucket) == []  # no temporary or partial object anywhere


@pytest.mark.parametrize(
    "settings",
    [
        QUICK,
        # botocore's attempts run out long before total_seconds: the client's bare error then names the
        # last failed attempt too (it says only "Service Unavailable" by itself).
        StorageConfig(retries=1, connect_timeout_s=1, read_timeout_s=1, total_seconds=60),
    ],
    ids=["time-bound", "attempts-bound"],
)
def test_a_slowdown_for_every_read_names_the_object_and_the_error(
    settings: StorageConfig, flaky_s3: FlakyS3, s3_bucket: str
) -> None:
    storage.configure(settings)
    url = f"{s3_bucket}/plates/sc01.mov"
    storage.write_bytes(url, b"plate")
    flaky_s3.faults = Faults(rate=1.0, kinds=("slowdown",), key="plates/sc01.mov")
    started = time.monotonic()
    with pytest.raises(StorageError) as info:
        storage.read_bytes(url)
    assert time.monotonic() - started <= settings.longest_failure_seconds
    assert info.value.url == url and "HTTP 503" in info.value.reason, info.value  # a HEAD's 503 has no body
