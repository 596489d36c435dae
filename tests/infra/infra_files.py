"""Paths and loaders for the files under infra/, shared by the infra tests."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
INFRA = REPO / "infra"
LAUNCHER_CONFIGS = {"aws": INFRA / "aws" / "cluster.yaml", "gcp": INFRA / "gcp" / "cluster.yaml"}
K8S = INFRA / "k8s"
SCHEMAS = K8S / "schemas"
DOCKERFILES = {"gpu": INFRA / "docker" / "Dockerfile.gpu", "cpu": INFRA / "docker" / "Dockerfile.cpu"}


def load_yaml(path: Path) -> Any:
    """Parse one YAML document."""
    with path.open() as f:
        return yaml.safe_load(f)


def versions() -> dict[str, Any]:
    """infra/versions.toml, the one place for pinned versions."""
    with (INFRA / "versions.toml").open("rb") as f:
        return tomllib.load(f)


def pyproject() -> dict[str, Any]:
    """The repository's pyproject.toml."""
    with (REPO / "pyproject.toml").open("rb") as f:
        return tomllib.load(f)


def walk_keys(node: Any, path: str = "") -> list[tuple[str, str]]:
    """Every (path, key) of every mapping in a parsed YAML tree."""
    found: list[tuple[str, str]] = []
    if isinstance(node, dict):
        for key, value in node.items():
            found.append((path, str(key)))
            found.extend(walk_keys(value, f"{path}.{key}"))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            found.extend(walk_keys(value, f"{path}[{i}]"))
    return found
