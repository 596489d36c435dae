"""Elasticity on a real multi-node Ray cluster on this machine (``ray.cluster_utils.Cluster``).

The head has no CPUs; worker nodes carry a custom resource (``recast_gpu``)
standing in for a GPU, and the job's actors ask for one each.  The job starts
with one such node and ``max_actors: 2``: the second actor is pending (the
demand an autoscaler would act on).  A node is added mid-job; the pending
actor lands on it and must take chunks as soon as its set-up is done.  At the
end no actor of the job is alive.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any

import pytest
import ray

from cluster.driver import JobRunner
from cluster.spec.job import parse_spec
from jobs.demo_media import write_source_image
from tests.clips import ClipSpec, read_index, write_clip
from tests.faultjobs import finish, run_in_thread
from tests.raytools import RAY_ENV, REPO, free_port

pytestmark = pytest.mark.ray
logger = logging.getLogger(__name__)

RESOURCE = "recast_gpu"
FRAMES, CHUNKS = 480, 20
NODE: dict[str, Any] = {"num_cpus": 1, "resources": {RESOURCE: 1}, "object_store_memory": 100 * 1024 * 1024}


@pytest.fixture(scope="module")
def cluster():
    from ray.cluster_utils import Cluster

    os.environ.update(RAY_ENV)
    if ray.is_initialized():
        ray.shutdown()
    cluster = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": 0,
            "object_store_memory": 100 * 1024 * 1024,
            # The state API (list_actors) is served by the dashboard; keep it off fixed ports.
            "include_dashboard": True,
            "dashboard_host": "127.0.0.1",
            "dashboard_port": free_port(),
            "dashboard_agent_listen_port": free_port(),
            "ray_client_server_port": free_port(),
            "metrics_export_port": free_port(),
        },
    )
    try:
        cluster.add_node(**NODE)
        ray.init(
            address=cluster.address,
            runtime_env={"env_vars": {"PYTHONPATH": str(REPO), **RAY_ENV}},
            log_to_driver=False,
            configure_logging=False,
        )
        yield cluster
    finally:
        ray.shutdown()
        cluster.shutdown()


@pytest.fixture(scope="module")
def media(tmp_path_factory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("elastic-media")
    return {
        # 20 one-second chunks of tiny frames: one actor analyses a chunk in about 0.35 s here and a
        # late actor is ready about 1.5 s after its node joins, so the new node still finds work.
        "shot": write_clip(str(root / "long.mp4"), ClipSpec(frames=FRAMES, rate=24, gop=12, audio=False)),
        "source": write_source_image(str(root / "source.jpg")),
    }


def alive_actors() -> list:
    from ray.util.state import list_actors

    return list_actors(filters=[("state", "=", "ALIVE")])


def test_node_added_mid_job_takes_chunks(cluster, media, tmp_path) -> None:
    spec = parse_spec(
        {
            "job_id": "elastic-test",
            "shots": [{"name": "long", "url": media["shot"]}],
            "identities": {"hero": {"images": [media["source"]], "face_index": 0}},
            "output": {"url": os.path.join(str(tmp_path), "{shot}.mp4"), "preset": "ultrafast"},
            "chunking": {"seconds": 1, "min_seconds": 1, "snap_to_keyframes": False},
            "resources": {
                "gpus_per_actor": 0,
                "cpus_per_actor": 1,
                "custom": {RESOURCE: 1},
                "max_actors": 2,
                "max_inflight_per_actor": 2,
            },
            "faces": {"batch_size": 4},
        }
    )
    runner = JobRunner(spec)
    thread, result = run_in_thread(runner, name="elastic-job")
    # Mid-job: once the first actor has produced a result, one actor is still pending.
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and thread.is_alive():
        if runner.summary is not None and runner.summary.first_analysis_seconds is not None:
            break
        time.sleep(0.1)
    assert thread.is_alive(), result
    assert runner.summary is not None and runner.summary.first_analysis_seconds is not None
    first_nodes = {n["NodeID"] for n in ray.nodes() if n["Alive"]}
    new_node = cluster.add_node(**NODE)
    joined = time.perf_counter() - runner.started
    summary = finish(thread, result)
    assert summary.ok, summary.table()
    assert new_node.node_id not in first_nodes

    # Every actor that worked says where it ran.
    node_of = {info.label: info.node_id for info in summary.actor_info}
    (shot,) = summary.shots
    assert shot.frames == FRAMES and shot.chunks == CHUNKS
    runs = [r for r in shot.timeline if r["ok"]]
    assert sorted((r["kind"], r["chunk"]) for r in runs) == sorted(
        [("analyze", i) for i in range(CHUNKS)] + [("render", i) for i in range(CHUNKS)]
    )
    assert all(r["actor"] in node_of for r in runs), (node_of, {r["actor"] for r in runs})
    per_node: dict[str, int] = {}
    for r in runs:
        per_node[node_of[r["actor"]]] = per_node.get(node_of[r["actor"]], 0) + 1
    on_new = [r for r in runs if node_of[r["actor"]] == new_node.node_id]
    assert on_new, f"no chunk ran on the new node; per node: {per_node}"
    first_on_new = min(r["start"] for r in on_new)
    logger.warning(
        "FIGURES elastic: node joined at %.2fs, its first chunk started %.2fs later; "
        "chunks per node (analysis+render) %s; job %.1fs",
        joined,
        first_on_new - joined,
        {k[:8]: v for k, v in per_node.items()},
        summary.wall_seconds,
    )
    assert first_on_new >= joined - 0.5

    # The output is whole and in order although chunks came from two nodes.
    import av

    with av.open(shot.output_url) as container:
        indices = [read_index(f.to_ndarray(format="rgb24")) for f in container.decode(video=0)]
    assert indices == list(range(FRAMES))

    # No actor of the job is left: the nodes could scale down.
    deadline = time.monotonic() + 30
    while alive_actors() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert alive_actors() == []
