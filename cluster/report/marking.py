"""One sentence on how a job's outputs are marked as AI-made, for the summary table and the report."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def marking_line(marking: Mapping[str, Any] | None) -> str:
    """One sentence on how the job's outputs are marked as AI-made (``""`` when not known)."""
    if not marking:
        return ""
    parts = []
    if marking.get("watermark"):
        parts.append(f"invisible watermark {marking.get('watermark_payload')} in the replaced faces")
    if marking.get("content_credentials"):
        parts.append(f"Content Credentials signed with the {marking.get('signer')} key")
    said = " and ".join(parts) if parts else "not marked"
    off = marking.get("switched_off") or []
    if off:
        said += f"; switched off: {', '.join(off)} (allowed by the cluster policy {marking.get('switched_off_by')})"
    return f"Marked as AI-made: {said}."
