"""Graph rewrites made before an ONNX Runtime session is created."""

from __future__ import annotations

import logging
import os

import onnx

log = logging.getLogger(__name__)

PROTOBUF_LIMIT_BYTES = 2**31 - 2**24
"""A serialised graph must stay under protobuf's 2 GB (with a margin for the envelope)."""


def winograd_model(path: str) -> tuple[str | bytes, list[str]]:
    """The model at ``path`` with its large 3x3 convolutions as Winograd F(4x4, 3x3), as bytes.

    Returns ``path`` itself (and no rewrites) when nothing qualifies, when the
    file cannot be read here (ONNX Runtime then says what is wrong with it), or
    when the rewrite fails: it is a speed-up, never a reason for a job to stop.
    """
    from google.protobuf.message import DecodeError

    from pipeline.models.runtime.winograd import rewrite_winograd

    try:
        model = onnx.load(path)
    except (OSError, DecodeError, ValueError):
        return path, []
    try:
        sites = rewrite_winograd(model)
    except Exception as exc:  # noqa: BLE001 - any failure on a user's graph means: run it as it is
        log.warning("%s: Winograd rewrite skipped (%s: %s)", path, type(exc).__name__, exc)
        return path, []
    if not sites:
        return path, []
    if model.ByteSize() >= PROTOBUF_LIMIT_BYTES:
        log.warning("%s: Winograd rewrite skipped: the rewritten graph is over protobuf's 2 GB limit", path)
        return path, []
    note = f"winograd F(4x4,3x3) on {len(sites)} conv(s)"
    log.info("%s: %s", os.path.basename(path), note)
    return model.SerializeToString(), [note]
