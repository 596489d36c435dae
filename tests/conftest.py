"""Shared fixtures and hooks of the test suite.

- ``s3_endpoint`` / ``s3_bucket``: a real S3 endpoint on loopback.  moto's threaded
  server speaks the S3 wire protocol; s3fs talks to it through ``AWS_ENDPOINT_URL``
  exactly as it would talk to AWS, so nothing is mocked inside the process under test.
- ``flaky_s3``: a fault-injecting proxy in front of it (:mod:`tests.flaky_s3`), no faults until
  the test sets some; ``AWS_ENDPOINT_URL`` points at the proxy for the test.
- ``ray_session`` / ``ray_local``: one local Ray shared by the tests that can share it
  (see :class:`tests.raytools.SharedRay`); ``no_ray`` for tests that prove Ray never started.
- ``default_pack`` / ``default_models``: the embedded default model pack, built once per session,
  and its warm CPU role objects (face, QC, LoRA, provenance and job tests).
- ``signed``: a render signed with Content Credentials by a test CA (provenance and job tests).
- Tiers (:mod:`tests.tiers`): the fast tier runs first and a failure there stops the run
  after it; the summary gives each tier's count and time.
- The ``gpu`` marker: such tests skip, saying why, when CUDA is missing, or fail when
  ``--require-gpu`` (or ``RECAST_REQUIRE_GPU=1``) says a GPU must be there.

Fixtures used by one folder's tests only live in that folder's ``conftest.py``
(``tests/pipeline/video/``, ``tests/jobs/``, ``tests/integration/faults/``); helpers that are not
fixtures live in plain modules (``tests/clips.py``, ``tests/faultjobs.py``...), never in a test module.
"""

from __future__ import annotations

import os
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import tiers
from tests.flaky_s3 import FlakyS3
from tests.raytools import SharedRay, free_port
from tests.tiers import pytest_runtest_protocol, pytest_terminal_summary  # noqa: F401 - hooks of the tiers

# Test clips are seconds long: their jobs cut 1 s chunks, below the 10 s floor of a real job
# (pipeline.limits).  Set before any Ray or subprocess starts, so submitted jobs see it too.
os.environ.setdefault("RECAST_MIN_CHUNK_SECONDS", "1")
# Every output is signed (issue 43): with no studio key, with the installation's own key, made on
# first use.  The suite's is made once per run in a folder of its own, never in the tester's home.
os.environ.setdefault(
    "RECAST_SIGNING_DIR", os.path.join(tempfile.gettempdir(), f"recast-test-signing-{os.getpid()}")
)

S3_ENV = {
    "AWS_ACCESS_KEY_ID": "recast-test",
    "AWS_SECRET_ACCESS_KEY": "recast-test-secret",
    "AWS_DEFAULT_REGION": "us-east-1",
}


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """URL of a loopback S3 server; the process environment points s3fs at it."""
    from moto.server import ThreadedMotoServer

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    saved = {k: os.environ.get(k) for k in [*S3_ENV, "AWS_ENDPOINT_URL"]}
    os.environ.update(S3_ENV, AWS_ENDPOINT_URL=endpoint)
    try:
        yield endpoint
    finally:
        server.stop()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@pytest.fixture()
def s3_bucket(s3_endpoint: str) -> str:
    """A fresh, empty bucket on the loopback endpoint, as ``s3://name``."""
    import fsspec

    name = f"recast-{uuid.uuid4().hex[:10]}"
    fs = fsspec.filesystem("s3", skip_instance_cache=True)
    fs.mkdir(name)
    return f"s3://{name}"


@pytest.fixture()
def flaky_s3(s3_endpoint: str) -> Iterator[FlakyS3]:
    """The loopback S3 server behind a proxy that fails what the test asks it to (none at first).

    ``AWS_ENDPOINT_URL`` points at the proxy for the test (a Ray started in it inherits that), and
    cached s3fs clients are dropped on the way in and out; the store settings go back to the default."""
    from s3fs import S3FileSystem

    from pipeline.store import storage
    from pipeline.store.retries import StorageConfig

    proxy = FlakyS3(s3_endpoint).start()
    os.environ["AWS_ENDPOINT_URL"] = proxy.endpoint
    S3FileSystem.clear_instance_cache()
    try:
        yield proxy
    finally:
        os.environ["AWS_ENDPOINT_URL"] = s3_endpoint
        S3FileSystem.clear_instance_cache()
        storage.configure(StorageConfig())
        proxy.stop()


@pytest.fixture(scope="session")
def ray_session() -> Iterator[SharedRay]:
    """The session's shared local Ray (2 CPUs, no GPU, no dashboard), shut down at the end.

    Tests that need Ray throughout ask for ``ray_local``; a fixture or test that needs it for
    a block (a module-scoped reference run, say) uses ``with ray_session.use():``.
    """
    shared = SharedRay()
    try:
        yield shared
    finally:
        if shared.running():
            shared.stop()


@pytest.fixture()
def ray_local(ray_session: SharedRay) -> SharedRay:
    """This process connected to the shared local Ray, every CPU of it free."""
    ray_session.ensure()
    return ray_session


@pytest.fixture(scope="session")
def default_pack(tmp_path_factory: pytest.TempPathFactory):
    """The embedded default pack, built once per test session into a fresh cache."""
    from pipeline.models.pack import load_pack

    return load_pack("builtin:default", cache_dir=str(tmp_path_factory.mktemp("default-pack-cache")))


@pytest.fixture(scope="session")
def default_models(default_pack):
    """Warm role objects (CPU sessions) of the embedded default pack."""
    from pipeline.models.loader import load_face_models
    from pipeline.models.runtime.settings import ExecutionConfig

    return load_face_models(default_pack, ExecutionConfig(providers=("CPUExecutionProvider",)))


@pytest.fixture(scope="module")
def signed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A short render signed with Content Credentials by a test CA
    (:func:`tests.pipeline.provenance.provenance_helpers.signed_render`)."""
    from tests.pipeline.provenance.provenance_helpers import signed_render

    return signed_render(tmp_path_factory.mktemp("c2pa"))


@pytest.fixture()
def no_ray(ray_session: SharedRay) -> Iterator[None]:
    """Ray is not running in this process during the test, and the test must not start it."""
    ray_session.stop()
    yield
    import ray

    assert not ray.is_initialized(), "the code under test started Ray"


REQUIRE_GPU_ENV = "RECAST_REQUIRE_GPU"
_CUDA_MISSING = pytest.StashKey[str]()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--require-gpu",
        action="store_true",
        default=False,
        help=f"tests marked gpu fail, instead of skipping, when CUDA is missing (also {REQUIRE_GPU_ENV}=1)",
    )
    tiers.addoption(parser)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Fast tier first, then the Ray tier, then the slow one (:mod:`tests.tiers`)."""
    tiers.order(config, items)


def _cuda_missing() -> str:
    """Why CUDA cannot be used here ("" when it can)."""
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    if not torch.cuda.is_available():
        return "torch finds no CUDA device"
    return ""


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Tests marked ``gpu``: skip without CUDA, or fail when a GPU is required."""
    if item.get_closest_marker("gpu") is None:
        return
    config = item.config
    if _CUDA_MISSING not in config.stash:
        config.stash[_CUDA_MISSING] = _cuda_missing()
    missing = config.stash[_CUDA_MISSING]
    if not missing:
        return
    if config.getoption("--require-gpu") or os.environ.get(REQUIRE_GPU_ENV) == "1":
        pytest.fail(f"needs a CUDA GPU, which is required here: {missing}", pytrace=False)
    pytest.skip(f"needs a CUDA GPU: {missing}")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Disconnect from Ray before the interpreter tears down its native extensions.

    A Ray driver connection left open at interpreter exit can crash the process
    after the last test (seen as exit code 139 with every test passed).
    """
    import sys

    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        ray.shutdown()
    session.config.stash[_EXIT_STATUS] = int(exitstatus)


_EXIT_STATUS = pytest.StashKey[int]()


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """Leave with pytest's own exit status once every report is written.

    The suite loads several native runtimes into one process (ONNX Runtime,
    torch, PyAV/FFmpeg, Ray's core worker, the C2PA library); on this machine
    their interpreter-exit teardown has crashed the process *after* pytest
    printed its summary (exit code 139 with every test passed), which would
    turn a green run red.  Nothing is left to do at that point, so skip the
    teardown.  Set RECAST_TEST_NORMAL_EXIT=1 to see the crash.
    """
    import sys

    status = config.stash.get(_EXIT_STATUS, None)
    if status is None or os.environ.get("RECAST_TEST_NORMAL_EXIT") == "1":
        return
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
