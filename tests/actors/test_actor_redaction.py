"""A render actor's own output never shows a credential: not in its worker log files, not on the driver's
terminal, where Ray prints it (``log_to_driver``) past the driver's logging filter.

A second driver process joins the shared local Ray with ``log_to_driver`` on, so its
captured stdout and stderr are what a user sees.  Its actor's set-up fails on a pack URL
that carries a token (the actor logs that at ERROR level), then the actor logs, prints
and raises with a URL whose password holds ``@`` and ``/``.  Phase 1 is a plain driver:
anything clear there came from the actor.  Phase 2 sets the driver up as ``jobs.render``
does and logs the re-raised actor error with its traceback.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.raytools import RAY_ENV, REPO

pytestmark = pytest.mark.ray

TOKEN = "tok3n-e18-actor-SECRET"
PASSWORD = "p@ss/w0rd@e18-SECRET"
SECRETS = (TOKEN, PASSWORD, "p@ss", "w0rd", "AKIAIOSFODNN7EXAMPLE", "dXNlcjpwYXNzLWUxOA")

DRIVER = r"""
import json, logging, os, sys, time
import ray
from actors.render import RenderActor, RenderConfig

TOKEN, PASSWORD, PACK = sys.argv[1], sys.argv[2], sys.argv[3]
URL = f"s3://AKIAIOSFODNN7EXAMPLE:{PASSWORD}@plates/sh010.mov?token={TOKEN}"


def noisy(worker):
    logging.getLogger("actors.render").warning("cannot read %s", URL)
    print("Authorization: Basic dXNlcjpwYXNzLWUxOA==")
    print(f'password="two words {TOKEN}"', file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    return [os.readlink(f"/proc/self/fd/{fd}") for fd in (1, 2)]


def boom(worker):
    raise ValueError(f"cannot open {URL}")


def wait_for(files, marker, seconds=30.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if all(os.path.exists(f) for f in files) and marker in "".join(open(f).read() for f in files):
            return
        time.sleep(0.2)
    raise TimeoutError(marker)


ray.init(log_to_driver=True, runtime_env={"env_vars": {"PYTHONPATH": os.getcwd(), "RAY_AUTH_MODE": "disabled"}})
actor = RenderActor.options(num_cpus=0).remote(RenderConfig(pack_url=PACK), "bad")
try:
    ray.get(actor.info.remote())
    raise SystemExit("the actor's set-up should have failed")
except Exception as exc:  # the ModelPackError, re-raised by the actor
    setup_error = type(exc).__name__
files = ray.get(actor.__ray_call__.remote(noisy))
wait_for(files, "Authorization")
time.sleep(3.0)  # the log monitor forwards the lines to this driver
print(json.dumps({"files": files, "setup_error": setup_error}), flush=True)
print("PHASE-2", file=sys.stderr, flush=True)

from jobs.cli import configure_logging
from pipeline.store.redact import install_log_redaction, redact_process_output

configure_logging("INFO")
redact_process_output()
install_log_redaction()
try:
    ray.get(actor.__ray_call__.remote(boom))
except Exception as exc:
    logging.getLogger("driver").exception("render failed")
    print(f"recast: render failed: {exc}", file=sys.stderr)
sys.stderr.flush()
ray.kill(actor)
"""


def test_actor_output_is_redacted_in_its_logs_and_on_the_driver(ray_local, tmp_path: Path) -> None:
    pack = str(tmp_path / f"no-such-pack?X-Amz-Signature={TOKEN}&token={TOKEN}")
    env = {**os.environ, **RAY_ENV, "RAY_ADDRESS": ray_local.gcs_address or "", "PYTHONPATH": str(REPO)}
    result = subprocess.run(
        [sys.executable, "-c", DRIVER, TOKEN, PASSWORD, pack],
        check=False,
        cwd=str(REPO),
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    phase1, _, phase2 = result.stderr.partition("PHASE-2")
    assert phase2, result.stderr[-4000:]
    outcome = json.loads(result.stdout.strip().splitlines()[-1])
    assert outcome["setup_error"] in ("ModelPackError", "StorageError", "RayTaskError(ModelPackError)")

    # Phase 1, a plain driver: the actor's lines arrived, redacted by the actor itself.
    forwarded = result.stdout + phase1
    assert "set-up failed" in forwarded and "cannot read s3://***REDACTED***@plates/sh010.mov" in forwarded
    assert "Authorization: Basic ***REDACTED***" in forwarded and 'password="***REDACTED***"' in forwarded
    # Phase 2: the actor's exception, re-raised on the driver, logged with its traceback and printed.
    assert "render failed" in phase2 and "Traceback" in phase2 and "ValueError: cannot open" in phase2
    texts = {"driver stdout": result.stdout, "driver stderr": result.stderr}
    for path in outcome["files"]:  # the actor's worker log files on the node
        texts[path] = Path(path).read_text()
        assert "***REDACTED***" in texts[path], path
    for name, text in texts.items():
        for secret in SECRETS:
            assert secret not in text, (name, secret)
