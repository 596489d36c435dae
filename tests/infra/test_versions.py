"""infra/versions.toml, pyproject.toml, the Dockerfiles and the installed Ray agree."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import ray
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from tests.infra.infra_files import DOCKERFILES, pyproject, versions


def dockerfile_args(path: Path) -> dict[str, str]:
    """ARG defaults of a Dockerfile (the last default given for a name wins)."""
    args: dict[str, str] = {}
    for match in re.finditer(r"^ARG\s+(\w+)=(\S+)\s*$", path.read_text(), re.MULTILINE):
        args[match.group(1)] = match.group(2)
    return args


def dockerfile_base(path: Path) -> str:
    """The FROM image with ARG defaults substituted."""
    (image,) = re.findall(r"^FROM\s+(\S+)", path.read_text(), re.MULTILINE)
    args = dockerfile_args(path)
    return re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], image)


def dependency(name: str, deps: list[str]) -> Requirement:
    (req,) = [r for r in map(Requirement, deps) if r.name == name]
    return req


def python_tag() -> str:
    return "py" + versions()["python"]["version"].replace(".", "")


def test_ray_pin_matches_pyproject_and_installed() -> None:
    pinned = versions()["ray"]["version"]
    req = dependency("ray", pyproject()["project"]["dependencies"])
    assert str(req.specifier) == f"=={pinned}"
    assert "default" in req.extras
    # The launcher-config tests use this Ray's private autoscaler API.
    assert ray.__version__ == pinned


def test_python_matches_requires_python() -> None:
    python = versions()["python"]["version"]
    spec = SpecifierSet(pyproject()["project"]["requires-python"])
    assert Version(python) in spec
    lower = [s.version for s in spec if s.operator == ">="]
    assert lower == [python], "versions.toml names the lowest supported Python"


def test_onnxruntime_gpu_pin_satisfies_gpu_extra() -> None:
    pinned = versions()["onnxruntime_gpu"]["version"]
    req = dependency("onnxruntime-gpu", pyproject()["project"]["optional-dependencies"]["gpu"])
    assert Version(pinned) in req.specifier


def test_image_names_follow_the_pins() -> None:
    v = versions()
    ray_version, tag = v["ray"]["version"], python_tag()
    assert v["image"]["gpu_base"] == f"rayproject/ray:{ray_version}-{tag}-gpu"
    assert v["image"]["cpu_base"] == f"rayproject/ray:{ray_version}-{tag}"
    project = pyproject()["project"]["version"]
    for flavour in ("gpu", "cpu"):
        assert v["image"][flavour].endswith(f"/recast-{flavour}:{project}-ray{ray_version}-{tag}")


@pytest.mark.parametrize("flavour", sorted(DOCKERFILES))
def test_dockerfile_versions_agree(flavour: str) -> None:
    path, v = DOCKERFILES[flavour], versions()
    args = dockerfile_args(path)
    assert args["RAY_VERSION"] == v["ray"]["version"]
    assert args["PYTHON_TAG"] == python_tag()
    assert dockerfile_base(path) == v["image"][f"{flavour}_base"]
    text = path.read_text()
    assert v["image"][flavour] in text, "the build command in the header names the image the configs run"
    assert "-r infra/requirements-nodeps.txt" in text and "--no-deps" in text
    if flavour == "gpu":
        assert args["ONNXRUNTIME_GPU_VERSION"] == v["onnxruntime_gpu"]["version"]
        extras = v["onnxruntime_gpu"]["extras"]
        assert f'"onnxruntime-gpu[{extras}]==${{ONNXRUNTIME_GPU_VERSION}}"' in text
        assert '".[gpu]"' in text and '".[cpu]"' not in text
    else:
        assert '".[cpu]"' in text and "onnxruntime-gpu" not in text


@pytest.mark.parametrize("flavour", sorted(DOCKERFILES))
def test_dockerfile_runs_as_non_root(flavour: str) -> None:
    users = re.findall(r"^USER\s+(\S+)", DOCKERFILES[flavour].read_text(), re.MULTILINE)
    assert users and users[-1] not in {"root", "0", "0:0"}


@pytest.mark.parametrize("flavour", sorted(DOCKERFILES))
def test_dockerfile_copies_only_existing_paths(flavour: str) -> None:
    repo = DOCKERFILES[flavour].parents[2]
    for line in re.findall(r"^COPY\s+(.+)$", DOCKERFILES[flavour].read_text(), re.MULTILINE):
        sources = [s for s in line.split()[:-1] if not s.startswith("--")]
        for source in sources:
            # README.md is the lead's; it must exist before an image is built.
            if source != "README.md":
                assert (repo / source).exists(), f"{flavour}: COPY source {source} is missing"


@pytest.mark.parametrize("flavour", sorted(DOCKERFILES))
def test_dockerfile_carries_the_cluster_policy(flavour: str) -> None:
    """RECAST_POLICY_URL can be baked in at build time; empty by default (set by the launcher or KubeRay)."""
    text = DOCKERFILES[flavour].read_text()
    assert re.search(r'^ARG RECAST_POLICY_URL=""$', text, re.MULTILINE)
    assert re.search(r"^\s+RECAST_POLICY_URL=\$\{RECAST_POLICY_URL\} \\$", text, re.MULTILINE)
    # Declared after FROM: an ARG before it would be empty in the build stage.
    assert text.index("ARG RECAST_POLICY_URL") > text.index("\nFROM ")
