"""Where each pass of a shot is written."""

from __future__ import annotations

import re

from pipeline.plates.sequence import is_sequence_url, parse_sequence_url
from pipeline.provenance.paths import render_url

PASSES = ("matte", "face", "tracks")
LAYERS = ("matte", "face")
"""The passes written as EXR frames with each rendered frame (``tracks`` is written once per shot)."""
VIDEO_PADDING = 4
"""Digits of a video's pass frame numbers (more where a number needs them)."""


def pass_url(
    output_url: str, name: str, template: str | None = None, *, shot: str = "", job_id: str = ""
) -> str:
    """The URL of pass ``name`` of the shot written to ``output_url``.

    ``template`` (``output.pass_url``: ``{pass}``, ``{shot}``, ``{job_id}``, no extension)
    or, by default, the output's own name with ``_<pass>`` added.  A template is rendered by
    :func:`pipeline.provenance.paths.render_url` (SpecError naming ``output.pass_url``).  The extension follows
    the pass: the matte and face are ``.exr`` sequences (with the output's padding for an image
    sequence, ``.####`` for a video, whose frames count from 0), tracks ``.jsonl``.
    """
    sequence = is_sequence_url(output_url)
    if template is not None:
        values = {"pass": name, "shot": shot, "job_id": job_id}
        stem = render_url(template, values, field="output.pass_url")
        padding = f".{'#' * (parse_sequence_url(output_url).padding if sequence else VIDEO_PADDING)}"
    elif sequence:
        pattern = parse_sequence_url(output_url)
        stem = pattern.directory.rstrip("/") + "/" + pattern.head.rstrip("._-") + f"_{name}"
        padding = pattern.head[len(pattern.head.rstrip("._-")) :] + "#" * pattern.padding
        padding = padding if padding.startswith((".", "_", "-")) else "." + padding
    else:
        stem, padding = re.sub(r"\.[A-Za-z0-9]+$", "", output_url) + f"_{name}", "." + "#" * VIDEO_PADDING
    if name == "tracks":
        return f"{stem}.jsonl"
    return f"{stem}{padding}.exr"


def chan_url(tracks_url: str, track: int) -> str:
    """The Nuke ``.chan`` file of one track, beside the tracks' JSON lines."""
    return re.sub(r"\.jsonl$", "", tracks_url) + f".track{track}.chan"
