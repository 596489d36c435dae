"""A Ray cluster on this machine that the real autoscaler grows and shrinks (Ray's fake multi-node provider).

``ray.cluster_utils.AutoscalingCluster`` does the same, but its ``start()`` and
``shutdown()`` run ``ray stop --force``, which ends every Ray process on the
machine (the shared test Ray, other clusters), and the 2.60 wheel lacks the
``fake_multi_node/example.yaml`` it reads.  So the head is started here as
:func:`tests.raytools.ray_head` starts one (``ray start --head --block`` in its
own process group, on free ports, with a dashboard for ``ray job submit``),
with an autoscaling config built in full and ``RAY_FAKE_CLUSTER=1``.  The
autoscaler's monitor runs on the head and starts worker nodes as processes of
its own (each a raylet with its object store and workers), so stopping the
head's process group ends the whole cluster and nothing else.

A worker node type carries a custom resource standing in for a GPU; the head
has none, so every render actor is demand that only a worker node satisfies.

What the fake provider does not do: notice a node whose processes were killed.
It keeps such a node in its list (a cloud provider drops a reclaimed instance),
and the v1 autoscaler's liveness check never fires for it here, so the lost
node is not replaced by a new one; its actors' replacements go to the nodes
the autoscaler has (it launches one beyond the demand while earlier launches
register).  The v2 autoscaler, which would reconcile this, needs the same
missing ``example.yaml`` at run time.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.raytools import Head, free_port, running_head

RESOURCE = "recast_gpu"
WORKER_TYPE = "render.worker"


def autoscaling_config(
    gcs_address: str, *, max_workers: int, idle_timeout_minutes: float, worker_cpus: float = 1
) -> dict[str, Any]:
    """The cluster config the autoscaler reads: a head with no render resource, and one worker type
    with one ``recast_gpu`` each (0 to ``max_workers`` nodes)."""
    return {
        "cluster_name": f"recast-test-{uuid.uuid4().hex[:8]}",
        "max_workers": max_workers,
        "upscaling_speed": 1.0,
        "idle_timeout_minutes": idle_timeout_minutes,
        "docker": {},
        "provider": {
            "type": "fake_multinode",
            "use_node_id_as_ip": True,
            "disable_node_updaters": True,
            "disable_launch_config_check": True,
            # Worker raylets join this head (the provider's default is port 6379 on this host).
            "gcs_address": gcs_address,
        },
        "auth": {"ssh_user": "ubuntu"},
        "available_node_types": {
            "ray.head.default": {"resources": {"CPU": 1}, "node_config": {}, "max_workers": 0},
            WORKER_TYPE: {
                "resources": {"CPU": worker_cpus, RESOURCE: 1, "object_store_memory": 80 * 1024 * 1024},
                "node_config": {},
                "min_workers": 0,
                "max_workers": max_workers,
            },
        },
        "head_node_type": "ray.head.default",
        "file_mounts": {},
        "cluster_synced_files": [],
        "file_mounts_sync_continuously": False,
        "rsync_exclude": [],
        "rsync_filter": [],
        "initialization_commands": [],
        "setup_commands": [],
        "head_setup_commands": [],
        "worker_setup_commands": [],
        "head_start_ray_commands": [],
        "worker_start_ray_commands": [],
    }


@dataclass
class AutoscalingHead(Head):
    """A running autoscaling head (:func:`autoscaling_head`)."""

    def worker_nodes(self) -> list[dict[str, Any]]:
        """The live worker nodes (the fake provider's), as ``ray.nodes()`` lists them."""
        import ray

        return [n for n in ray.nodes() if n["Alive"] and n["Resources"].get(RESOURCE)]

    def wait_workers(self, count: int, timeout: float, *, at_least: bool = False) -> float:
        """Wait until exactly (or ``at_least``) ``count`` worker nodes are alive; the seconds it took."""
        started = time.monotonic()
        while True:
            n = len(self.worker_nodes())
            if n == count or (at_least and n >= count):
                return time.monotonic() - started
            if time.monotonic() - started > timeout:
                raise TimeoutError(f"{n} worker node(s) after {timeout:.0f}s, waiting for {count}")
            time.sleep(0.5)

    def kill_node(self, node_id: str) -> int:
        """End a worker node at once, as a reclaimed spot instance ends: SIGKILL to its raylet and
        every process of that node (its workers, object store, agents); returns how many."""
        killed = 0
        for pid in _pids_of_node(node_id):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
                killed += 1
        return killed

    def drain_node(
        self, node_id: str, *, deadline_seconds: int, reason: str = "spot instance reclaimed"
    ) -> None:
        """Ray's drain API, as a cloud provider's reclaim notice reaches a cluster (KubeRay and the
        autoscaler call the same GCS request): the node takes no new work and is killed at the
        deadline by whoever drained it (here :meth:`kill_node`)."""
        done = self.cli(
            "drain-node",
            "--address",
            self.gcs_address,
            "--node-id",
            node_id,
            "--reason",
            "DRAIN_NODE_REASON_PREEMPTION",
            "--reason-message",
            reason,
            "--deadline-remaining-seconds",
            str(deadline_seconds),
        )
        if done.returncode != 0:
            raise RuntimeError(f"ray drain-node failed: {done.stdout}{done.stderr}")


def _pids_of_node(node_id: str) -> list[int]:
    """Processes whose environment names ``node_id`` as their fake node (the provider sets it on the
    node's raylet, and its children inherit it)."""
    wanted = f"RAY_OVERRIDE_NODE_ID_FOR_TESTING={node_id}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if wanted in environ.split(b"\0"):
            found.append(int(entry.name))
    return found


@contextlib.contextmanager
def autoscaling_head(
    *, max_workers: int = 2, idle_timeout_minutes: float = 0.1, ready_timeout: float = 120.0
) -> Iterator[AutoscalingHead]:
    """Start the head (no render resource) with the real autoscaler on the fake provider; stop the
    whole cluster afterwards (only its own processes)."""
    port = free_port()
    temp_dir = tempfile.mkdtemp(prefix="ra-", dir="/tmp")
    config = autoscaling_config(
        f"127.0.0.1:{port}", max_workers=max_workers, idle_timeout_minutes=idle_timeout_minutes
    )
    config_path = os.path.join(temp_dir, "autoscaling.json")
    Path(config_path).write_text(json.dumps(config))
    with running_head(
        port=port,
        temp_dir=temp_dir,
        num_cpus=1,
        ready_timeout=ready_timeout,
        extra_args=[f"--autoscaling-config={config_path}", "--node-ip-address", "127.0.0.1"],
        extra_env={"RAY_FAKE_CLUSTER": "1", "AUTOSCALER_UPDATE_INTERVAL_S": "1"},
    ) as head:
        yield AutoscalingHead(head.gcs_address, head.dashboard_url, head.env, head.process)
