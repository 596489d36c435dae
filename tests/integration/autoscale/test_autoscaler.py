"""Recast on Ray's real autoscaler: scale from zero and back, a node lost mid-render, a node drained.

The cluster (:mod:`tests.autoscaling`) is a head with no render resource and one worker type with one
``recast_gpu`` (0-2 nodes, or 0-3); the autoscaler starts and stops real raylets on this machine
through Ray's fake multi-node provider.  Every job's outputs must equal, byte for byte, those of the
same job on a fixed cluster (the shared local Ray), whatever happened to the nodes meanwhile.

Run alone: ``.venv/bin/python -m pytest tests/integration/autoscale -m slow``.  The cluster is
started without ``ray stop`` (which would end every Ray on the machine), so other tests may run
beside it, only slower.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any, Self

import pytest
import ray
import yaml

from cluster.driver import JobRunner
from cluster.spec.job import parse_spec
from jobs.demo_media import make_face_clip, write_source_image
from tests.autoscaling import RESOURCE, AutoscalingHead, autoscaling_head
from tests.faultjobs import finish, run_in_thread, sha256_file
from tests.raytools import RAY_ENV, REPO

pytestmark = [pytest.mark.ray, pytest.mark.slow]
logger = logging.getLogger(__name__)

SHOTS = {"sh010": 40.0, "sh020": 30.0}
"""Shot -> seconds at 24 fps: 70 one-second chunks, many more than the cluster's nodes, and enough that
the work left when a node is killed outlasts its replacement's start (28 chunks were done by the
surviving actor in 7 s, before the replacement was up)."""
IDLE_TIMEOUT_MINUTES = 0.1
"""The autoscaler removes a worker node idle this long (6 s)."""


@pytest.fixture(scope="module")
def media(tmp_path_factory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("autoscale-media")
    clips = {
        name: make_face_clip(
            str(root / f"{name}.mp4"), seconds=seconds, width=320, height=192, fps=24, gop=24
        )
        for name, seconds in SHOTS.items()
    }
    return {**clips, "source": write_source_image(str(root / "source.jpg"))}


JOB_ID = "autoscale"
"""Every job here and the reference have one job id (the watermark carries it): the same bytes are
then expected whatever the autoscaler did; each job has its own output folder and work area."""


def job(media: dict[str, str], out: str, job_id: str, **resources: Any) -> dict[str, Any]:
    """The job: both shots, one-second chunks, CPU actors that each need one ``recast_gpu``."""
    return {
        "job_id": job_id,
        "shots": [{"name": name, "url": media[name]} for name in SHOTS],
        "identities": {"hero": {"images": [media["source"]], "face_index": 0}},
        "output": {"url": os.path.join(out, "{shot}.mp4"), "preset": "ultrafast"},
        "chunking": {"seconds": 1, "min_seconds": 1, "snap_to_keyframes": False},
        "resources": {"gpus_per_actor": 0, "cpus_per_actor": 1, "custom": {RESOURCE: 1}, **resources},
        "faces": {"batch_size": 4},
    }


@pytest.fixture(scope="module")
def reference(media, ray_session, tmp_path_factory) -> dict[str, str]:
    """The outputs' sha256 from the same job on a fixed cluster (the shared local Ray, two actors)."""
    out = str(tmp_path_factory.mktemp("autoscale-reference"))
    data = job(media, out, JOB_ID, max_actors=2)
    data["resources"].pop("custom")
    with ray_session.use():
        summary = JobRunner(parse_spec(data)).run()
    assert summary.ok, summary.table()
    ray_session.stop()  # the tests below connect this process to their own cluster
    return {name: sha256_file(os.path.join(out, f"{name}.mp4")) for name in SHOTS}


class NodeWatch:
    """Counts the live worker nodes every half second on a thread: the most seen, and every node id."""

    def __init__(self, head: AutoscalingHead) -> None:
        self.head = head
        self.most = 0
        self.seen: dict[str, float] = {}  # node id -> first seen (monotonic)
        self.first_up: float | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="node-watch", daemon=True)

    def __enter__(self) -> Self:
        self.started = time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.is_set():
            nodes = self.head.worker_nodes()
            now = time.monotonic()
            self.most = max(self.most, len(nodes))
            for node in nodes:
                self.seen.setdefault(node["NodeID"], now)
            if nodes and self.first_up is None:
                self.first_up = now
            self._stop.wait(0.5)


def connect(head: AutoscalingHead, timeout: float = 60.0) -> None:
    """Connect this process to the head as a driver.  The dashboard answers a moment before the head's
    raylet is registered in the GCS, and until then Ray finds no node to connect to: tried again."""
    os.environ.update(RAY_ENV)
    if ray.is_initialized():
        ray.shutdown()
    deadline = time.monotonic() + timeout
    while True:
        try:
            ray.init(
                address=head.gcs_address,
                runtime_env={"env_vars": {"PYTHONPATH": str(REPO), **RAY_ENV}},
                log_to_driver=False,
                configure_logging=False,
            )
            return
        except ConnectionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(1.0)


def outputs(out: str) -> dict[str, str]:
    return {name: sha256_file(os.path.join(out, f"{name}.mp4")) for name in SHOTS}


def test_ray_job_submit_scales_from_zero_and_back(media, reference, tmp_path) -> None:
    out = str(tmp_path / "out")
    spec_path = tmp_path / "job.yaml"
    spec_path.write_text(yaml.safe_dump(job(media, out, JOB_ID)))  # max_actors unset
    with autoscaling_head(max_workers=2, idle_timeout_minutes=IDLE_TIMEOUT_MINUTES) as head:
        connect(head)
        try:
            assert head.worker_nodes() == []  # from zero: the head holds no render resource
            with NodeWatch(head) as watch:
                submitted = time.monotonic()
                done = head.submit(["python", "-m", "jobs.render", str(spec_path)])
                ended = time.monotonic()
                assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
                down = head.wait_workers(0, timeout=120)
            assert outputs(out) == reference
            # The pool grew with the queue: the autoscaler's second node was asked for and used.
            assert watch.most == 2, watch.most
            summary = json.loads(Path(out, ".recast-work", JOB_ID, "summary.json").read_text())
            chunks = sum(s["chunks"] for s in summary["shots"])
            nodes_used = {a["node_id"] for a in summary["actor_info"]}
            assert len(nodes_used) == 2 and chunks == int(sum(SHOTS.values()))
            assert watch.first_up is not None
            logger.warning(
                "FIGURES autoscale: submit to first worker node %.1fs, to first actor ready %.1fs "
                "(driver start to set-up %.1fs), first chunk %.1fs after the driver started; job %.1fs; "
                "scale-down to the head alone %.1fs after the job ended; %d nodes for %d chunks",
                watch.first_up - submitted,
                summary["setup_seconds"],
                summary["setup_seconds"],
                summary["first_chunk_seconds"],
                ended - submitted,
                down,
                len(watch.seen),
                chunks,
            )
        finally:
            ray.shutdown()


def _actor_nodes(head: AutoscalingHead) -> dict[str, str]:
    """Node id -> label of every alive render actor (the state API, through the head's dashboard)."""
    from ray.util.state import list_actors

    alive = list_actors(
        address=head.dashboard_url,
        filters=[("state", "=", "ALIVE"), ("class_name", "=", "RenderWorker")],
        detail=True,
    )
    return {a.node_id: a.name or a.actor_id for a in alive}


def _wait_working(
    runner: JobRunner, thread: threading.Thread, *, rendered: bool, timeout: float = 180
) -> None:
    """Until the job has analysed (``rendered``: rendered) its first chunk: every actor holds calls then."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and thread.is_alive():
        summary = runner.summary
        if summary is not None and (
            summary.first_chunk_seconds if rendered else summary.first_analysis_seconds
        ):
            return
        time.sleep(0.2)
    raise AssertionError("the job did not get going in time")


def test_a_node_lost_mid_job_is_replaced_and_its_calls_redone(media, reference, tmp_path) -> None:
    out = str(tmp_path / "out")
    # Room for a third node: the fake provider keeps the killed node in its count (tests/autoscaling.py).
    with autoscaling_head(max_workers=3, idle_timeout_minutes=IDLE_TIMEOUT_MINUTES) as head:
        connect(head)
        try:
            with NodeWatch(head) as watch:
                runner = JobRunner(parse_spec(job(media, out, JOB_ID, max_actors=2)))
                thread, result = run_in_thread(runner, name="lost-node-job")
                head.wait_workers(2, timeout=120, at_least=True)
                # Early enough that the lost actor's replacement still finds work when it is ready.
                _wait_working(runner, thread, rendered=False)
                # The node of an actor that is ready and working (one still setting up holds no call).
                assert runner.summary is not None
                victim = next(i.node_id for i in runner.summary.actor_info if i.node_id)
                killed = head.kill_node(victim)  # a reclaimed spot instance: gone, no notice
                killed_at = time.monotonic()
                runner_started = time.monotonic() - (time.perf_counter() - runner.started)
                summary = finish(thread, result, timeout=300)
            assert killed > 0
            assert summary.ok, summary.table()
            assert outputs(out) == reference
            assert summary.preempted_calls >= 1  # the calls it held were handed to another actor
            # The lost actor's replacement was placed on a live node the autoscaler brought up (see
            # tests/autoscaling.py: the fake provider does not replace the killed node itself) and did
            # work there after the kill.
            node_of = {i.label: i.node_id for i in summary.actor_info}
            runs = [r for s in summary.shots for r in s.timeline]
            kill = killed_at - runner_started
            early = {r["actor"] for r in runs if r["start"] < kill}
            replacement = {r["actor"] for r in runs if r["ok"] and r["actor"] not in early}
            assert replacement, "no actor that started after the kill did any work"
            assert all(node_of[label] != victim for label in replacement), (replacement, node_of, victim)
            # max_actors: 2: never more actors asked for than that, and the lost one's replacement.
            worked = {r["actor"] for s in summary.shots for r in s.timeline}
            assert len(worked) <= 3 and len(summary.actor_info) <= 3, (worked, summary.actor_info)
            logger.warning(
                "FIGURES autoscale-lost: %d call(s) redone after the node was killed; %d node(s) seen; job %.1fs",
                summary.preempted_calls,
                len(watch.seen),
                summary.wall_seconds,
            )
        finally:
            ray.shutdown()


def test_a_drained_node_finishes_its_calls_and_takes_no_more(media, reference, tmp_path) -> None:
    out = str(tmp_path / "out")
    with autoscaling_head(max_workers=3, idle_timeout_minutes=IDLE_TIMEOUT_MINUTES) as head:
        connect(head)
        try:
            runner = JobRunner(parse_spec(job(media, out, JOB_ID)))  # unsized: grows
            thread, result = run_in_thread(runner, name="drained-node-job")
            head.wait_workers(1, timeout=120, at_least=True)
            _wait_working(runner, thread, rendered=True)
            victim, label = next(iter(_actor_nodes(head).items()))
            head.drain_node(victim, deadline_seconds=120)  # a reclaim notice with time to spare
            drained_at = time.perf_counter() - runner.started
            summary = finish(thread, result, timeout=300)
            assert summary.ok, summary.table()
            assert outputs(out) == reference
            assert summary.drained_actors >= 1
            assert summary.preempted_calls == 0  # every call it held finished before the deadline
            on_victim = {i.label for i in summary.actor_info if i.node_id == victim}
            # No call started on the drained node after the driver saw the drain (one poll, 2 s).
            late = [
                r
                for s in summary.shots
                for r in s.timeline
                if r["actor"] in on_victim and r["start"] > drained_at + 3.0
            ]
            assert not late, late
            logger.warning(
                "FIGURES autoscale-drain: actor %s's node drained at %.1fs; %d actor(s) retired, "
                "0 calls lost; job %.1fs",
                label,
                drained_at,
                summary.drained_actors,
                summary.wall_seconds,
            )
        finally:
            ray.shutdown()
