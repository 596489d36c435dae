"""The Ray cluster launcher configs pass Ray's own validation, offline.

`prepare_config` merges the provider's defaults.yaml (read from the Ray wheel,
no cloud call) and `validate_config` checks the result against Ray's
`ray-schema.json`.  Both are private Ray API, so Ray is pinned (see
test_versions.py).  node_config is opaque to Ray's schema (it goes to the
cloud API as is), so the Recast-specific checks below cover what matters there.
"""

from __future__ import annotations

import copy
import re
import socket
from collections.abc import Callable
from typing import Any

import jsonschema
import pytest
from ray.autoscaler._private.util import prepare_config, validate_config

from tests.infra.infra_files import LAUNCHER_CONFIGS, load_yaml, versions, walk_keys

NVENC_GPUS = {"L4", "L40S", "A10G"}
NO_NVENC_GPUS = {"H100", "A100", "H200"}


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail the test if anything tries to open a connection (validation must be offline)."""

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError(f"network access during config validation: {args}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def ray_validate(config: dict[str, Any]) -> dict[str, Any]:
    """What `ray up` does to a config before using it, minus the cloud calls."""
    prepared = prepare_config(copy.deepcopy(config))
    validate_config(prepared)
    return prepared


@pytest.fixture(params=sorted(LAUNCHER_CONFIGS))
def cloud(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def config(cloud: str) -> dict[str, Any]:
    return load_yaml(LAUNCHER_CONFIGS[cloud])


def worker_types(config: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in config["available_node_types"].items() if k != config["head_node_type"]}


def test_passes_ray_validation(config: dict[str, Any], no_network: None) -> None:
    prepared = ray_validate(config)
    assert prepared["provider"]["type"] in {"aws", "gcp"}
    # fill_node_type_min_max_workers gives every type an explicit cap.
    for name, node_type in prepared["available_node_types"].items():
        assert node_type["max_workers"] <= prepared["max_workers"], name


def _set(path: list[str], value: Any) -> Callable[[dict[str, Any]], None]:
    def mutate(config: dict[str, Any]) -> None:
        node = config
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value

    return mutate


def _drop(key: str) -> Callable[[dict[str, Any]], None]:
    return lambda config: config.pop(key)


BROKEN: dict[str, tuple[Callable[[dict[str, Any]], None], type[Exception] | tuple[type[Exception], ...]]] = {
    "unknown top-level key": (_set(["max_worker"], 4), jsonschema.ValidationError),
    "max_workers of wrong type": (_set(["max_workers"], "many"), jsonschema.ValidationError),
    "idle timeout of wrong type": (_set(["idle_timeout_minutes"], "5m"), jsonschema.ValidationError),
    "unknown key in docker": (_set(["docker", "imagee"], "x"), jsonschema.ValidationError),
    "missing head_node_type": (_drop("head_node_type"), (KeyError, ValueError)),
    "head_node_type not a node type": (_set(["head_node_type"], "nope"), (KeyError, ValueError)),
    "missing provider": (_drop("provider"), (KeyError, jsonschema.ValidationError)),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_broken_copy_fails_ray_validation(config: dict[str, Any], case: str) -> None:
    mutate, error = BROKEN[case]
    broken = copy.deepcopy(config)
    mutate(broken)
    with pytest.raises(error):
        ray_validate(broken)


@pytest.mark.parametrize(
    "case",
    ["unknown key in node type", "fractional GPU resource", "missing resources"],
)
def test_broken_node_type_fails_ray_validation(config: dict[str, Any], case: str) -> None:
    broken = copy.deepcopy(config)
    node_type = next(iter(worker_types(broken).values()))
    if case == "unknown key in node type":
        node_type["min_worker"] = 0
    elif case == "fractional GPU resource":
        node_type["resources"]["GPU"] = 0.5
    else:
        del node_type["resources"]
    with pytest.raises(jsonschema.ValidationError):
        ray_validate(broken)


def test_head_is_cpu_only_and_takes_no_work(config: dict[str, Any]) -> None:
    head = config["available_node_types"][config["head_node_type"]]
    assert head["resources"] == {"CPU": 0}
    assert head.get("max_workers", 0) == 0


def test_gpu_workers_scale_from_zero_with_a_cap(config: dict[str, Any]) -> None:
    assert isinstance(config["max_workers"], int) and config["max_workers"] > 0
    assert 0 < config["idle_timeout_minutes"] <= 30
    workers = worker_types(config)
    assert workers
    for name, node_type in workers.items():
        assert node_type["min_workers"] == 0, name
        assert node_type["resources"]["GPU"] >= 1, name
        # Enough CPUs per GPU to decode and encode beside the model.
        assert node_type["resources"]["CPU"] / node_type["resources"]["GPU"] >= 8, name


def test_nvenc_and_cpu_encoding_types(cloud: str, config: dict[str, Any]) -> None:
    gpus: dict[str, str] = {}
    for name, node_type in worker_types(config).items():
        labels = node_type["labels"]
        gpu, nvenc = labels["recast.io/gpu"], labels["recast.io/nvenc"]
        assert nvenc == ("true" if gpu in NVENC_GPUS else "false"), name
        assert gpu in NVENC_GPUS | NO_NVENC_GPUS, name
        gpus[gpu] = nvenc
    expected = {"aws": {"L4", "A10G", "L40S", "H100"}, "gcp": {"L4", "H100"}}[cloud]
    assert set(gpus) == expected


def _is_spot(cloud: str, node_config: dict[str, Any]) -> bool:
    if cloud == "aws":
        return node_config.get("InstanceMarketOptions", {}).get("MarketType") == "spot"
    return node_config.get("scheduling", {}).get("provisioningModel") == "SPOT"


def test_spot_preferred_with_on_demand_fallback(cloud: str, config: dict[str, Any]) -> None:
    workers = worker_types(config)
    spot = {n: t for n, t in workers.items() if _is_spot(cloud, t["node_config"])}
    on_demand = {n: t for n, t in workers.items() if n not in spot}
    assert spot and len(spot) == len(on_demand)
    for name, node_type in spot.items():
        assert name.endswith("-spot") and node_type["labels"]["recast.io/capacity"] == "spot"
        twin_name = name.removesuffix("-spot") + "-ondemand"
        twin = on_demand[twin_name]
        assert twin["labels"]["recast.io/capacity"] == "on-demand"
        assert twin["resources"] == node_type["resources"]
        machine_key = "InstanceType" if cloud == "aws" else "machineType"
        assert twin["node_config"][machine_key] == node_type["node_config"][machine_key]
        # Autoscaler v2 orders equal fits by priority; v1 by name, reversed.
        assert node_type["priority"] > twin["priority"]
        assert name > twin_name


def test_credentials_from_roles_never_keys(cloud: str, config: dict[str, Any]) -> None:
    forbidden = {
        "ssh_private_key",
        "gcp_credentials",
        "aws_access_key_id",
        "aws_secret_access_key",
        "credentials",
        "private_key",
        "password",
        "token",
    }
    keys = {key.lower() for _, key in walk_keys(config)}
    assert not keys & forbidden
    text = LAUNCHER_CONFIGS[cloud].read_text()
    assert not re.search(r"AKIA[0-9A-Z]{16}|BEGIN [A-Z ]*PRIVATE KEY", text)
    for name, node_type in config["available_node_types"].items():
        node_config = node_type["node_config"]
        if cloud == "aws":
            assert node_config["IamInstanceProfile"]["Name"], name
        else:
            accounts = node_config["serviceAccounts"]
            assert accounts and all(a["email"].endswith(".iam.gserviceaccount.com") for a in accounts), name


def test_images_are_ours_on_the_pinned_ray(config: dict[str, Any]) -> None:
    image = versions()["image"]
    assert config["docker"]["head_image"] == image["cpu"]
    assert config["docker"]["worker_image"] == image["gpu"]
    # Nothing is installed when a node starts: the image carries everything.
    assert not config.get("setup_commands")


def test_dashboard_on_loopback_and_cluster_policy(cloud: str, config: dict[str, Any]) -> None:
    """The job API runs any code: it listens on the head's loopback, reached by `ray dashboard` (SSH)."""
    head = " ".join(config["head_start_ray_commands"])
    assert "--dashboard-host=127.0.0.1" in head
    assert "0.0.0.0" not in LAUNCHER_CONFIGS[cloud].read_text()
    # The studio policy is the cluster's, for the head (driver) and the workers alike.
    policy = [o for o in config["docker"]["run_options"] if o.startswith("--env=RECAST_POLICY_URL=")]
    assert len(policy) == 1
    assert policy[0].split("=", 2)[2].startswith({"aws": "s3://", "gcp": "gs://"}[cloud])
    assert not config["docker"].get("head_run_options") and not config["docker"].get("worker_run_options")


def test_token_authentication_on_every_node(config: dict[str, Any]) -> None:
    """Ray's token authentication (issue 42): every container runs with RAY_AUTH_MODE=token, and the
    token of the machine that runs `ray up` (~/.ray/auth_token) reaches every node, so the job API,
    the dashboard and the GCS refuse a request without it."""
    assert "--env=RAY_AUTH_MODE=token" in config["docker"]["run_options"]
    assert config["file_mounts"] == {"~/.ray/auth_token": "~/.ray/auth_token"}
    starts = " ".join(config["head_start_ray_commands"] + config["worker_start_ray_commands"])
    assert "RAY_AUTH_MODE=disabled" not in starts
