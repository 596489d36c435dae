"""Issue 42: the README's ``ray job submit`` lines, run as written, in a fresh shell, against a head they
start with Ray's default authentication (token), and Recast's own driver told what to set when a
token cluster refuses it.

The lines are read from the README (the ``bash`` block after its ``readme-submit`` marker), so the
README cannot drift from what is tested; the getting-started page must hold the same lines.  They
run in a copy of the checkout (its ``.venv`` linked in), with a fresh ``HOME`` (no
``~/.ray/auth_token`` yet), none of the test process's ``RAY_*`` settings, and ``RAY_TMPDIR``
private to the test, so the head they start is stopped alone afterwards.  The case with
authentication disabled is ``test_submit.py`` (every head of :mod:`tests.raytools` runs so).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from jobs.demo_media import make_face_clip, write_source_image
from pipeline.video.probe import probe
from tests.raytools import REPO

pytestmark = [pytest.mark.ray, pytest.mark.slow]

MARKER = "<!-- readme-submit:"
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"


def submit_lines(text: str) -> list[str]:
    """The command lines of the ``bash`` block after the marker (comments kept: bash ignores them)."""
    after = text.split(MARKER, 1)[1]
    block = after.split("```bash\n", 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if line.strip()]


def checkout_copy(dest: Path) -> Path:
    """The repository's files (tracked, and untracked but not ignored) copied to ``dest``, with the
    checkout's ``.venv`` linked in (as a user's checkout has it after the README's set-up)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = REPO / name
        if source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    (dest / ".venv").symlink_to(REPO / ".venv")
    return dest


def fresh_shell_env(home: Path, ray_tmp: Path) -> dict[str, str]:
    """A new login's environment: a fresh HOME, the system PATH, no RAY_* or AWS_* of this process."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("RAY_", "AWS_", "VIRTUAL_ENV", "PYTHON")) and k not in ("PATH", "HOME")
    }
    env.update(HOME=str(home), PATH=SYSTEM_PATH, RAY_TMPDIR=str(ray_tmp), RAY_USAGE_STATS_ENABLED="0")
    return env


def stop_processes_under(folder: Path, grace: float = 10.0) -> None:
    """End every process whose command line names ``folder`` (the head's session lives there)."""

    def pids() -> list[int]:
        found = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit() and int(entry.name) != os.getpid():
                try:
                    if str(folder).encode() in (entry / "cmdline").read_bytes():
                        found.append(int(entry.name))
                except OSError:
                    continue
        return found

    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids():
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + grace
        while pids() and time.monotonic() < deadline:
            time.sleep(0.2)


def job_spec(tmp_path: Path) -> dict[str, Any]:
    plate = make_face_clip(str(tmp_path / "plate.mp4"), seconds=1.5, width=192, height=144)
    source = write_source_image(str(tmp_path / "source.jpg"))
    return {
        "job_id": "readme-submit",
        "shots": [{"name": "plate", "url": plate}],
        "identities": {"hero": {"images": [source], "face_index": 0}},
        "output": {"url": str(tmp_path / "out" / "{shot}.mp4"), "preset": "ultrafast"},
        "chunking": {"seconds": 1, "min_seconds": 1},
        "resources": {"cpus_per_actor": 1, "max_actors": 1},
        "faces": {"batch_size": 4},
    }


def test_the_readme_and_getting_started_give_the_same_submit_lines() -> None:
    readme = submit_lines((REPO / "README.md").read_text())
    page = (REPO / "docs" / "getting-started.md").read_text()
    assert "\n".join(readme) in page
    assert any(line.startswith("ray job submit ") for line in readme)


def shell(
    command: list[str], cwd: Path, env: dict[str, str], *, timeout: float
) -> subprocess.CompletedProcess[str]:
    """``command`` in ``cwd`` with ``env``, its output captured as text (its exit status not checked)."""
    return subprocess.run(
        command, check=False, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )


def port_taken(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


@pytest.mark.timeout(600)
def test_the_readme_submit_lines_on_a_head_with_default_authentication(tmp_path, no_ray) -> None:
    # The README's head takes Ray's default ports: another Ray on this machine would answer in its place.
    taken = [port for port in (6379, 8265) if port_taken(port)]
    assert not taken, f"ports {taken} are taken by another Ray on this machine: the README's head needs them"
    lines = submit_lines((REPO / "README.md").read_text())
    checkout = checkout_copy(tmp_path / "recast")
    home = tmp_path / "home"
    home.mkdir()
    ray_tmp = Path(tempfile.mkdtemp(prefix="rs-", dir="/tmp"))  # short: Ray's socket paths must fit 107 bytes
    spec = job_spec(tmp_path)
    (checkout / "spec.yaml").write_text(yaml.safe_dump(spec))
    env = fresh_shell_env(home, ray_tmp)
    submit = next(line for line in lines if line.startswith("ray job submit "))
    try:
        # The README's lines, as a user pastes them into a new shell.
        done = shell(["bash", "-e", "-c", "\n".join(lines)], checkout, env, timeout=540)
        assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
        assert "succeeded" in (done.stdout + done.stderr).lower()
        assert (home / ".ray" / "auth_token").is_file()  # made by the README's line, not by this test
        output = Path(spec["output"]["url"].replace("{shot}", "plate"))
        frames = probe(spec["shots"][0]["url"]).frame_count
        assert frames > 0 and probe(str(output)).frame_count == frames

        # The head authenticates: the same submission without RAY_AUTH_MODE (the first try)
        # is refused by Ray with "Authentication required" ...
        bare = shell(["bash", "-c", f"source .venv/bin/activate\n{submit}"], checkout, env, timeout=120)
        assert bare.returncode != 0 and "Authentication required" in bare.stdout + bare.stderr

        # ... and Recast's own driver joining that head without the token says what to set (exit 2),
        # not Ray's "a previous Ray instance that has since crashed".
        elsewhere = {**spec["output"], "url": str(tmp_path / "out2" / "{shot}.mp4")}
        (checkout / "spec.yaml").write_text(
            yaml.safe_dump({**spec, "job_id": "readme-join", "output": elsewhere})
        )
        joined = shell(
            [".venv/bin/python", "-m", "jobs.render", "spec.yaml"],
            checkout,
            {**env, "RAY_ADDRESS": "127.0.0.1:6379"},
            timeout=180,
        )
        assert joined.returncode == 2, joined.stdout[-3000:] + joined.stderr[-3000:]
        said = joined.stderr
        assert "cannot join the Ray cluster at 127.0.0.1:6379" in said, said[-3000:]
        assert (
            "RAY_AUTH_MODE unset" in said and "set RAY_AUTH_MODE=token and give the cluster's token" in said
        )
        assert (home / ".ray" / "auth_token").read_text().strip() not in said + joined.stdout
        assert not (tmp_path / "out2" / "plate.mp4").exists()
    finally:
        stop_processes_under(ray_tmp)
        shutil.rmtree(ray_tmp, ignore_errors=True)
