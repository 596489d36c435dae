"""The KubeRay manifests validate strictly against the v1 CRD schemas.

The CRD schemas declare `properties` but rarely `additionalProperties`, and the
API server would prune (silently drop) unknown fields: a typo such as
`maxReplica` would vanish without a word.  `strict_schema` closes every object
that declares its properties, so a typo fails here instead.
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import jsonschema
import pytest
import yaml

from tests.infra.infra_files import K8S, REPO, SCHEMAS, load_yaml, versions

# Keywords whose value is one subschema, a list of them, or a name -> subschema map.
_ONE_SCHEMA = ("items", "additionalProperties", "not", "additionalItems", "contains", "propertyNames")
_SCHEMA_LISTS = ("allOf", "anyOf", "oneOf")
_SCHEMA_MAPS = ("properties", "patternProperties", "definitions", "$defs")


def strict_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A copy of `schema` in which objects with declared properties reject undeclared keys.

    An object schema is closed (`additionalProperties: false`) when it lists
    `properties`, says nothing about `additionalProperties`, and does not carry
    `x-kubernetes-preserve-unknown-fields: true`.  Property names declared in
    sibling allOf/anyOf/oneOf branches stay allowed.  Only schema positions are
    walked, never `default`, `enum` or `example` values.
    """
    closed = copy.deepcopy(schema)
    _close(closed)
    return closed


def _close(node: dict[str, Any], close_self: bool = True) -> None:
    # Branches of a combinator beside declared properties describe only part of
    # the object: their names join the parent's list instead of closing alone.
    partial_branches = "properties" in node
    for key in _ONE_SCHEMA:
        if isinstance(node.get(key), dict):
            _close(node[key])
    if isinstance(node.get("items"), list):
        for sub in node["items"]:
            _close(sub)
    for key in _SCHEMA_LISTS:
        for sub in node.get(key, []):
            _close(sub, close_self=not partial_branches)
    for key in _SCHEMA_MAPS:
        for sub in node.get(key, {}).values():
            if isinstance(sub, dict):
                _close(sub)
    if (
        close_self
        and "properties" in node
        and "additionalProperties" not in node
        and not node.get("x-kubernetes-preserve-unknown-fields", False)
    ):
        for key in _SCHEMA_LISTS:
            for sub in node.get(key, []):
                for name in sub.get("properties", {}):
                    node["properties"].setdefault(name, {})
        node["additionalProperties"] = False


def load_schema(name: str) -> dict[str, Any]:
    return json.loads((SCHEMAS / f"{name}-v1.schema.json").read_text())


@pytest.fixture(scope="module")
def validators() -> dict[str, jsonschema.Draft7Validator]:
    out = {}
    for kind, name in (("RayCluster", "raycluster"), ("RayJob", "rayjob")):
        schema = strict_schema(load_schema(name))
        jsonschema.Draft7Validator.check_schema(schema)
        out[kind] = jsonschema.Draft7Validator(schema)
    return out


def errors(validators: dict[str, jsonschema.Draft7Validator], manifest: dict[str, Any]) -> list[str]:
    found = validators[manifest["kind"]].iter_errors(manifest)
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in found]


@pytest.fixture(scope="module")
def raycluster() -> dict[str, Any]:
    return load_yaml(K8S / "raycluster.yaml")


@pytest.fixture(scope="module")
def rayjob() -> dict[str, Any]:
    return load_yaml(K8S / "rayjob.yaml")


@pytest.fixture(scope="module")
def configmap() -> dict[str, Any]:
    return load_yaml(K8S / "spec-configmap.yaml")


# ---- the strict walker itself ---------------------------------------------------------


def test_strict_schema_closes_declared_objects_only() -> None:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "spec": {"type": "object", "properties": {"a": {"type": "integer"}}},
            "free": {"type": "object", "properties": {"x": {}}, "x-kubernetes-preserve-unknown-fields": True},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "opaque": {"type": "object"},
            "list": {"type": "array", "items": {"type": "object", "properties": {"n": {}}}},
            "either": {"type": "object", "properties": {"p": {}}, "anyOf": [{"properties": {"q": {}}}]},
            "odd": {"type": "object", "default": {"properties": {"z": {}}}},
        },
    }
    v = jsonschema.Draft7Validator(strict_schema(schema))
    assert v.is_valid({"spec": {"a": 1}, "free": {"y": 1}, "labels": {"k": "v"}, "opaque": {"k": 1}})
    assert v.is_valid({"list": [{"n": 1}], "either": {"p": 1, "q": 2}, "odd": {"anything": 1}})
    assert not v.is_valid({"spec": {"a": 1, "b": 2}})
    assert not v.is_valid({"list": [{"n": 1, "m": 2}]})
    assert not v.is_valid({"either": {"r": 1}})
    assert not v.is_valid({"unknown": 1})
    assert "additionalProperties" not in schema["properties"]["spec"], "input schema left untouched"


def test_vendored_schemas_match_shared_copy() -> None:
    shared = REPO.parent / "shared" / "kuberay"
    if not shared.is_dir():
        pytest.skip(f"{shared} is absent (only the vendored copy is available)")
    for name in ("raycluster-v1.schema.json", "rayjob-v1.schema.json"):
        assert json.loads((SCHEMAS / name).read_text()) == json.loads((shared / name).read_text()), name


# ---- the manifests --------------------------------------------------------------------


@pytest.mark.parametrize("name", ["raycluster", "rayjob"])
def test_manifest_is_valid_strictly(validators: dict[str, Any], name: str) -> None:
    manifest = load_yaml(K8S / f"{name}.yaml")
    assert manifest["apiVersion"] == "ray.io/v1"
    assert errors(validators, manifest) == []


def _typo_in_worker_group(m: dict[str, Any]) -> None:
    _cluster_spec(m)["workerGroupSpecs"][0]["maxReplica"] = 4


def _int_ray_start_param(m: dict[str, Any]) -> None:
    _cluster_spec(m)["headGroupSpec"]["rayStartParams"]["num-cpus"] = 0


def _missing_group_name(m: dict[str, Any]) -> None:
    del _cluster_spec(m)["workerGroupSpecs"][0]["groupName"]


def _typo_in_container(m: dict[str, Any]) -> None:
    _cluster_spec(m)["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]["imagePullPolicyy"] = (
        "Always"
    )


def _typo_in_volume(m: dict[str, Any]) -> None:
    volumes = _cluster_spec(m)["workerGroupSpecs"][0]["template"]["spec"]["volumes"]
    volumes[0]["emptyDir"]["medium_"] = "Memory"


def _cluster_spec(m: dict[str, Any]) -> dict[str, Any]:
    return m["spec"]["rayClusterSpec"] if m["kind"] == "RayJob" else m["spec"]


BROKEN = {
    "typo in worker group": _typo_in_worker_group,
    "rayStartParams value not a string": _int_ray_start_param,
    "worker group without groupName": _missing_group_name,
    "typo in container": _typo_in_container,
    "typo in volume": _typo_in_volume,
}


@pytest.mark.parametrize("name", ["raycluster", "rayjob"])
@pytest.mark.parametrize("case", sorted(BROKEN))
def test_broken_copy_fails(validators: dict[str, Any], name: str, case: str) -> None:
    broken = load_yaml(K8S / f"{name}.yaml")
    BROKEN[case](broken)
    assert errors(validators, broken)


def test_broken_rayjob_fields_fail(validators: dict[str, Any], rayjob: dict[str, Any]) -> None:
    typo = copy.deepcopy(rayjob)
    typo["spec"]["entryPoint"] = typo["spec"].pop("entrypoint")
    wrong_type = copy.deepcopy(rayjob)
    wrong_type["spec"]["backoffLimit"] = "two"
    assert errors(validators, typo) and errors(validators, wrong_type)


def test_unknown_key_passes_loose_schema_but_not_strict(
    validators: dict[str, Any], raycluster: dict[str, Any]
) -> None:
    broken = copy.deepcopy(raycluster)
    _typo_in_worker_group(broken)
    assert jsonschema.Draft7Validator(load_schema("raycluster")).is_valid(broken)
    assert errors(validators, broken)


def test_raycluster_autoscales_gpu_workers(raycluster: dict[str, Any]) -> None:
    spec = raycluster["spec"]
    assert spec["enableInTreeAutoscaling"] is True
    assert spec["rayVersion"] == versions()["ray"]["version"]
    assert spec["headGroupSpec"]["rayStartParams"]["num-cpus"] == "0"
    groups = spec["workerGroupSpecs"]
    assert groups
    for group in groups:
        assert group["minReplicas"] == 0 and group["replicas"] == 0 and group["maxReplicas"] >= 1
        pod = group["template"]["spec"]
        container = pod["containers"][0]
        assert container["image"] == versions()["image"]["gpu"]
        limits = container["resources"]["limits"]
        assert int(limits["nvidia.com/gpu"]) >= 1
        assert any(t["key"] == "nvidia.com/gpu" for t in pod["tolerations"])
        assert pod["nodeSelector"]
        shm = [v for v in pod["volumes"] if v.get("emptyDir", {}).get("medium") == "Memory"]
        mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
        assert shm and mounts[shm[0]["name"]] == "/dev/shm"
        assert pod["securityContext"]["runAsNonRoot"] is True


def test_rayjob_runs_render_from_the_configmap(
    rayjob: dict[str, Any], raycluster: dict[str, Any], configmap: dict[str, Any]
) -> None:
    spec = rayjob["spec"]
    assert spec["entrypoint"] == "python -m jobs.render /config/spec.yaml"
    assert spec["backoffLimit"] >= 1
    assert spec["ttlSecondsAfterFinished"] > 0
    assert spec["shutdownAfterJobFinishes"] is True
    head = spec["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]
    config_volumes = [v for v in head["volumes"] if "configMap" in v]
    assert [v["configMap"]["name"] for v in config_volumes] == [configmap["metadata"]["name"]]
    mounts = {m["name"]: m["mountPath"] for m in head["containers"][0]["volumeMounts"]}
    assert mounts[config_volumes[0]["name"]] == "/config"
    assert "spec.yaml" in configmap["data"]

    # Apart from the spec volume, the job's cluster is the long-lived one.
    job_cluster = copy.deepcopy(spec["rayClusterSpec"])
    job_head = job_cluster["headGroupSpec"]["template"]["spec"]
    job_head["volumes"] = [v for v in job_head["volumes"] if "configMap" not in v]
    job_head["containers"][0]["volumeMounts"] = [
        m for m in job_head["containers"][0]["volumeMounts"] if m["mountPath"] != "/config"
    ]
    assert job_cluster == raycluster["spec"]


# ---- the ConfigMap: a core object, checked for shape only -------------------------------

_DNS_1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DATA_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")


def configmap_problems(manifest: Any) -> list[str]:
    """What is wrong with a ConfigMap's basic shape (empty when nothing is)."""
    if not isinstance(manifest, dict):
        return ["not a mapping"]
    problems = []
    extra = set(manifest) - {"apiVersion", "kind", "metadata", "data", "binaryData", "immutable"}
    if extra:
        problems.append(f"unknown keys {sorted(extra)}")
    if manifest.get("apiVersion") != "v1" or manifest.get("kind") != "ConfigMap":
        problems.append("apiVersion/kind must be v1/ConfigMap")
    name = manifest.get("metadata", {}).get("name") if isinstance(manifest.get("metadata"), dict) else None
    if not isinstance(name, str) or len(name) > 253 or not _DNS_1123.match(name):
        problems.append(f"metadata.name {name!r} is not a DNS-1123 subdomain")
    data = manifest.get("data", {})
    if not isinstance(data, dict):
        return [*problems, "data must be a mapping"]
    for key, value in data.items():
        if not isinstance(key, str) or not _DATA_KEY.match(key):
            problems.append(f"data key {key!r} is not a valid file name")
        if not isinstance(value, str):
            problems.append(f"data[{key!r}] must be a string, got {type(value).__name__}")
    if sum(len(str(v).encode()) for v in data.values()) > 1 << 20:
        problems.append("data exceeds 1 MiB")
    return problems


def test_configmap_shape(configmap: dict[str, Any]) -> None:
    assert configmap_problems(configmap) == []
    spec = yaml.safe_load(configmap["data"]["spec.yaml"])
    # The example must stay a valid job spec as the spec model evolves.
    from cluster.spec.job import parse_spec

    job = parse_spec(spec)
    assert job.resources.gpus_per_actor == 1 and job.resources.max_actors


@pytest.mark.parametrize(
    "path, value",
    [
        (("data", "spec.yaml"), 3),
        (("metadata", "name"), "Recast_Spec"),
        (("kind",), "Secret"),
        (("spec",), {}),
    ],
)
def test_broken_configmap_fails(configmap: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    broken = copy.deepcopy(configmap)
    node = broken
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    assert configmap_problems(broken)


def test_manifest_comments_name_real_files() -> None:
    for path in K8S.glob("*.yaml"):
        for ref in re.findall(r"infra/k8s/[\w.-]+\.yaml", path.read_text()):
            assert (REPO / ref).is_file(), f"{path.name} mentions missing {ref}"


def test_no_credentials_in_manifests() -> None:
    for path in K8S.glob("*.yaml"):
        text = path.read_text()
        assert not re.search(r"AKIA[0-9A-Z]{16}|BEGIN [A-Z ]*PRIVATE KEY|aws_secret_access_key", text), path
        assert "kind: Secret" not in text, path


# ---- the cluster policy and who may reach the dashboard -----------------------------------


def _pod_templates(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    spec = _cluster_spec(manifest)
    return [spec["headGroupSpec"]["template"]] + [g["template"] for g in spec["workerGroupSpecs"]]


@pytest.mark.parametrize("name", ["raycluster", "rayjob"])
def test_every_pod_runs_under_the_cluster_policy(name: str) -> None:
    for template in _pod_templates(load_yaml(K8S / f"{name}.yaml")):
        for container in template["spec"]["containers"]:
            env = {e["name"]: e.get("value", "") for e in container["env"]}
            assert env.get("RECAST_POLICY_URL", "").startswith("s3://"), container["name"]


def _matches(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.get("matchLabels", {}).items())


def networkpolicy_problems(policy: Any, manifests: list[dict[str, Any]], job_names: list[str]) -> list[str]:
    """Why ``policy`` does not keep the dashboard to the operator, the submitters and the cluster's own pods."""
    if not isinstance(policy, dict) or policy.get("kind") != "NetworkPolicy":
        return ["not a NetworkPolicy"]
    problems = []
    if policy.get("apiVersion") != "networking.k8s.io/v1":
        problems.append("apiVersion must be networking.k8s.io/v1")
    spec = policy.get("spec", {})
    selector = spec.get("podSelector", {})
    if not selector.get("matchLabels"):
        problems.append("podSelector must name the Recast pods")
    if "Ingress" not in spec.get("policyTypes", []):
        problems.append("policyTypes must include Ingress")
    for manifest in manifests:
        for template in _pod_templates(manifest):
            if not _matches(selector, template["metadata"]["labels"]):
                problems.append(f"pods {template['metadata']['labels']} are not selected")
    submitters, operator = set(), False
    for i, rule in enumerate(spec.get("ingress", [])):
        peers = rule.get("from") or []
        if not peers:
            problems.append(f"ingress[{i}] admits every source")
        ports = {p.get("port") for p in rule.get("ports", [])}
        for peer in peers:
            if "ipBlock" in peer:
                problems.append(f"ingress[{i}] admits an IP block")
                continue
            own_labels = peer.get("podSelector", {}).get("matchLabels")
            if "namespaceSelector" not in peer and own_labels == selector.get("matchLabels"):
                continue
            if ports != {8265}:
                problems.append(
                    f"ingress[{i}] admits pods other than the cluster's own on ports {sorted(ports) or 'all'}"
                )
            labels = peer.get("podSelector", {}).get("matchLabels", {})
            operator |= labels.get("app.kubernetes.io/name") == "kuberay-operator"
            if "batch.kubernetes.io/job-name" in labels:
                submitters.add(labels["batch.kubernetes.io/job-name"])
    if not operator:
        problems.append("the KubeRay operator cannot reach the dashboard")
    if missing := set(job_names) - submitters:
        problems.append(f"the submitter of RayJob(s) {sorted(missing)} cannot reach the dashboard")
    return problems


def test_dashboard_reachable_only_by_operator_submitter_and_own_pods(
    raycluster: dict[str, Any], rayjob: dict[str, Any]
) -> None:
    policy = load_yaml(K8S / "networkpolicy.yaml")
    manifests, jobs = [raycluster, rayjob], [rayjob["metadata"]["name"]]
    assert networkpolicy_problems(policy, manifests, jobs) == []
    # Inside the pod the dashboard listens on all interfaces (the head Service needs it).
    for manifest in manifests:
        assert _cluster_spec(manifest)["headGroupSpec"]["rayStartParams"]["dashboard-host"] == "0.0.0.0"

    def broken(edit: Any) -> list[str]:
        copy_ = copy.deepcopy(policy)
        edit(copy_)
        return networkpolicy_problems(copy_, manifests, jobs)

    assert broken(lambda p: p["spec"]["ingress"].append({"from": [{"ipBlock": {"cidr": "0.0.0.0/0"}}]}))
    assert broken(lambda p: p["spec"]["ingress"].append({"ports": [{"port": 8265}]}))
    assert broken(lambda p: p["spec"]["ingress"][1].pop("ports"))
    assert broken(lambda p: p["spec"]["ingress"][1]["from"].pop(1))
    assert broken(lambda p: p["spec"]["podSelector"]["matchLabels"].update(tier="other"))
    assert broken(lambda p: p["spec"].update(policyTypes=["Egress"]))


def test_token_authentication_from_one_secret(raycluster: dict[str, Any], rayjob: dict[str, Any]) -> None:
    """Ray's token authentication (issue 42) on the long-lived cluster and on a job's own cluster, from
    the Secret the studio makes once (so a submitting machine can read the same token)."""
    for spec in (raycluster["spec"], rayjob["spec"]["rayClusterSpec"]):
        assert spec["authOptions"] == {"mode": "token", "secretName": "recast-ray-token"}
    header = (K8S / "raycluster.yaml").read_text()
    assert "kubectl create secret generic recast-ray-token" in header
    assert "export RAY_AUTH_MODE=token" in header
