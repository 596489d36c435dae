"""Relative local paths in a job spec, made absolute against the spec file's folder."""

from __future__ import annotations

import os
from typing import Any


def _is_relative_path(value: Any) -> bool:
    return (
        isinstance(value, str)
        and "://" not in value
        and ":" not in value.split("/", 1)[0]
        and not os.path.isabs(value)
    )


def _abs(value: Any, base_dir: str) -> Any:
    return os.path.normpath(os.path.join(base_dir, value)) if _is_relative_path(value) else value


def _colour(colour: Any, base_dir: str) -> Any:
    """A colour block with a relative OCIO config path made absolute (``ocio://`` names stay)."""
    if isinstance(colour, dict) and "config" in colour:
        return {**colour, "config": _abs(colour["config"], base_dir)}
    return colour


def resolve_paths(data: dict[str, Any], base_dir: str) -> dict[str, Any]:
    """Make relative local paths absolute, leaving anything malformed for validation to report."""
    shots = data.get("shots")
    if isinstance(shots, list):
        data["shots"] = [
            {
                **s,
                **{k: _abs(s[k], base_dir) for k in ("url", "pattern") if k in s},
                **({"colour": _colour(s["colour"], base_dir)} if "colour" in s else {}),
            }
            if isinstance(s, dict)
            else s
            for s in shots
        ]
    if "colour" in data:
        data["colour"] = _colour(data["colour"], base_dir)
    identities = data.get("identities")
    if isinstance(identities, dict):
        resolved = {}
        for name, ident in identities.items():
            if isinstance(ident, dict):
                ident = dict(ident)
                if isinstance(ident.get("images"), list):
                    ident["images"] = [_abs(u, base_dir) for u in ident["images"]]
                if isinstance(ident.get("adapter"), dict) and "url" in ident["adapter"]:
                    ident["adapter"] = {**ident["adapter"], "url": _abs(ident["adapter"]["url"], base_dir)}
            resolved[name] = ident
        data["identities"] = resolved
    if isinstance(data.get("shots"), list):
        data["shots"] = [
            {**s, "output": _abs(s["output"], base_dir)} if isinstance(s, dict) and "output" in s else s
            for s in data["shots"]
        ]
    output = data.get("output")
    if isinstance(output, dict):
        data["output"] = {
            **output,
            **{k: _abs(output[k], base_dir) for k in ("url", "work_url") if k in output},
        }
    provenance = data.get("provenance")
    if isinstance(provenance, dict):
        provenance = dict(provenance)
        if "policy_url" in provenance:
            provenance["policy_url"] = _abs(provenance["policy_url"], base_dir)
        signer = provenance.get("signer")
        if isinstance(signer, dict):
            provenance["signer"] = {
                **signer,
                **{
                    k: _abs(signer[k], base_dir)
                    for k in ("certificate_chain_url", "private_key_url")
                    if k in signer
                },
            }
        data["provenance"] = provenance
    models = data.get("models")
    if isinstance(models, dict) and "pack" in models and not str(models["pack"]).startswith("builtin:"):
        data["models"] = {**models, "pack": _abs(models["pack"], base_dir)}
    return data
