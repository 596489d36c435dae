"""Ray helpers for tests: the session's shared local Ray, and a real head node started with ``ray start``.

The head runs as ``ray start --head --block`` in its own process group, so
stopping it ends exactly the processes this test started (a plain ``ray stop``
would end every Ray instance on the machine, other tests' included).
"""

from __future__ import annotations

import contextlib
import gc
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent
RAY_CLI = str(VENV_BIN / "ray")

RAY_ENV = {
    "RAY_USAGE_STATS_ENABLED": "0",
    # Token auth is the default for local clusters since 2.59; tests run without it.
    "RAY_AUTH_MODE": "disabled",
}
AGENT_WAIT_SECONDS = 60.0
HEAD_DRAIN_ENV = "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S"
S3_ENV_KEYS = ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION")


def free_port() -> int:
    """A TCP port on loopback that nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def s3_env_vars() -> dict[str, str]:
    """The loopback S3 settings of this process (set by the ``s3_endpoint`` fixture)."""
    return {k: os.environ[k] for k in S3_ENV_KEYS if k in os.environ}


logger = logging.getLogger(__name__)
IDLE_WAIT_SECONDS = 30.0
SHARED_NUM_CPUS = 2


class SharedRay:
    """One in-process local Ray that the tests of a session share (the ``ray_local`` fixture).

    Started on first use.  A test that needs a Ray of its own (a multi-node
    cluster, other settings) shuts the shared one down; the next test that asks
    for it starts it again.  Before each test the instance must be idle: CPUs
    still held after :data:`IDLE_WAIT_SECONDS` (actors a failed test left
    behind) make it start afresh, so one test's leftovers cannot slow or break
    the next.
    """

    def __init__(self, num_cpus: int = SHARED_NUM_CPUS) -> None:
        self.num_cpus = num_cpus
        self.gcs_address: str | None = None

    def ensure(self) -> None:
        """Make the shared instance the connected Ray, idle; start it when it is not."""
        if self.running() and self._idle():
            return
        self.stop()
        self._start()

    @contextlib.contextmanager
    def use(self) -> Iterator[None]:
        """The shared instance for the block; it stays up afterwards for the next test."""
        self.ensure()
        yield

    def running(self) -> bool:
        """Whether this process is connected to the shared instance (not to another Ray)."""
        import ray

        return ray.is_initialized() and self.gcs_address == ray.get_runtime_context().gcs_address

    def stop(self) -> None:
        """Disconnect from whatever Ray this process is connected to (the shared one ends with it)."""
        import ray

        if ray.is_initialized():
            ray.shutdown()
        self.gcs_address = None

    def _start(self) -> None:
        import ray

        os.environ.update(RAY_ENV)
        ray.init(
            address="local",  # a private instance: never attach to another Ray running on the machine
            num_cpus=self.num_cpus,
            num_gpus=0,
            include_dashboard=False,
            runtime_env={"env_vars": {"PYTHONPATH": str(REPO), **RAY_ENV}},
            log_to_driver=False,
            configure_logging=False,
        )
        self.gcs_address = ray.get_runtime_context().gcs_address

    def _idle(self) -> bool:
        """Wait until every CPU is free again (actors are released asynchronously).

        Handles kept alive only by reference cycles (a caught exception's traceback
        holds the frames that hold them) are collected first, so their actors end.
        """
        import ray

        gc.collect()
        deadline = time.monotonic() + IDLE_WAIT_SECONDS
        while True:
            total = ray.cluster_resources().get("CPU", 0.0)
            free = ray.available_resources().get("CPU", 0.0)
            if free >= total:
                return True
            if time.monotonic() > deadline:
                logger.warning(
                    "shared Ray: %.2f of %.2f CPUs still held; starting it afresh", total - free, total
                )
                return False
            time.sleep(0.2)


@dataclass
class Head:
    """A running head node started by :func:`ray_head`."""

    gcs_address: str
    dashboard_url: str
    env: dict[str, str]
    process: subprocess.Popen

    def cli(self, *args: str, timeout: float = 300.0) -> subprocess.CompletedProcess:
        """Run the ``ray`` CLI against this head (stdout and stderr captured as text)."""
        return subprocess.run(
            [RAY_CLI, *args],
            check=False,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=str(REPO),
        )

    def submit(
        self,
        entrypoint: list[str],
        *,
        env_vars: dict[str, str] | None = None,
        submission_id: str | None = None,
        timeout: float = 400.0,
    ) -> subprocess.CompletedProcess:
        """``ray job submit --working-dir <repo>`` and wait for the job to end.

        The head's job agent registers a little after the dashboard answers; a
        submission refused with "No available agent" is retried for a while.
        """
        args = ["job", "submit", "--address", self.dashboard_url, "--working-dir", str(REPO)]
        if env_vars:
            args += ["--runtime-env-json", json.dumps({"env_vars": env_vars})]
        if submission_id:
            args += ["--submission-id", submission_id]
        deadline = time.monotonic() + AGENT_WAIT_SECONDS
        while True:
            done = self.cli(*args, "--", *entrypoint, timeout=timeout)
            refused = done.returncode != 0 and "No available agent" in done.stdout + done.stderr
            if not refused or time.monotonic() > deadline:
                return done
            time.sleep(1.0)


@contextlib.contextmanager
def ray_head(num_cpus: int = 2, ready_timeout: float = 90.0) -> Iterator[Head]:
    """Start ``ray start --head`` with a dashboard on free ports; stop it afterwards."""
    temp_dir = tempfile.mkdtemp(prefix="rh-", dir="/tmp")
    with running_head(
        port=free_port(), temp_dir=temp_dir, num_cpus=num_cpus, ready_timeout=ready_timeout
    ) as head:
        yield head


@contextlib.contextmanager
def running_head(
    *,
    port: int,
    temp_dir: str,
    num_cpus: int,
    ready_timeout: float,
    extra_args: Sequence[str] = (),
    extra_env: Mapping[str, str] | None = None,
) -> Iterator[Head]:
    """``ray start --head --block`` on ``port`` with ``temp_dir`` (removed afterwards), a dashboard and every
    other port free, in its own process group; ``extra_args`` / ``extra_env`` for a head of another kind
    (an autoscaling one: :mod:`tests.autoscaling`).  Stopped afterwards, and only its own processes."""
    dash_port = free_port()
    env = {
        **os.environ,
        **RAY_ENV,
        "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        # On SIGTERM, `ray start --block` first drains its node, waiting up to this many seconds
        # (30 by default in Ray 2.60) for the raylet to end by itself; ours never does, so every
        # stop took 30 s.  No draining: the head and its workers end within a few seconds.
        HEAD_DRAIN_ENV: "0",
        **(extra_env or {}),
    }
    env.pop("RAY_ADDRESS", None)
    cmd = [
        RAY_CLI,
        "start",
        "--head",
        "--block",
        "--port",
        str(port),
        "--num-cpus",
        str(num_cpus),
        "--num-gpus",
        "0",
        "--include-dashboard",
        "true",
        "--dashboard-host",
        "127.0.0.1",
        "--dashboard-port",
        str(dash_port),
        "--temp-dir",
        temp_dir,
        # Ports that default to fixed numbers: another Ray on this machine may hold them.
        "--dashboard-agent-listen-port",
        str(free_port()),
        "--ray-client-server-port",
        str(free_port()),
        "--metrics-export-port",
        str(free_port()),
        "--disable-usage-stats",
        *extra_args,
    ]
    log_path = os.path.join(temp_dir, "head.log")
    log = open(log_path, "w")  # noqa: SIM115 - closed below
    process = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    dashboard_url = f"http://127.0.0.1:{dash_port}"
    head = Head(f"127.0.0.1:{port}", dashboard_url, env, process)
    try:
        _wait_ready(dashboard_url, process, ready_timeout, log_path)
        yield head
    finally:
        _stop(process)
        log.close()
        shutil.rmtree(temp_dir, ignore_errors=True)


def _wait_ready(dashboard_url: str, process: subprocess.Popen, timeout: float, log_path: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(
                f"ray start exited with {process.returncode}: {Path(log_path).read_text()[-3000:]}"
            )
        try:
            with urllib.request.urlopen(f"{dashboard_url}/api/version", timeout=2) as resp:
                if resp.status == 200:
                    # The job agent may come up a moment after the dashboard itself.
                    with urllib.request.urlopen(f"{dashboard_url}/api/jobs/", timeout=5) as jobs:
                        if jobs.status == 200:
                            return
        except OSError:
            pass
        time.sleep(0.5)
    raise TimeoutError(f"Ray head not ready after {timeout:.0f}s: {Path(log_path).read_text()[-3000:]}")


def _stop(process: subprocess.Popen) -> None:
    """End the head and everything it started (its own process group)."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass
    # Workers may outlive the `ray start` process for a moment; end the group for good.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=10)
