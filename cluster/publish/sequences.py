"""Finishing an image-sequence output: the actors wrote the rendered frames; the rest is done here.

Frames outside the rendered range are copied from the source bit for bit (their pass
frames are empty: matte 0, face 0), then one listing per sequence checks that every
frame is there at the size written.  The output's sha256 is that of its frame list
(``<number> <sha256>`` lines); the manifest records every frame's own.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from cluster.publish.merge import Published, Signing, Written, complete_frames, sequence_sidecar
from pipeline.errors import RecastError
from pipeline.plates.sequence import parse_sequence_url
from pipeline.video.probe import VideoInfo
from pipeline.video.sequence_types import SequencePattern

if TYPE_CHECKING:
    from pipeline.passes.layers import PassHeader

logger = logging.getLogger(__name__)


def complete_sequence(
    info: VideoInfo,
    output_url: str,
    written: Written,
    passes: dict[str, tuple[str, Written]],
    *,
    signing: Signing | None = None,
    replaced: Sequence[tuple[int, int]] = (),
) -> Published:
    """Complete the output (and each pass: pass -> (its pattern URL, the frames the actors wrote)),
    then sign it (``signing``): a sidecar manifest bound to every frame, those in ``replaced`` (runs
    of frame numbers whose faces were replaced) stated AI-modified."""
    from pipeline.plates.frames import copy_plate

    assert info.sequence is not None
    source, output = info.sequence.pattern, parse_sequence_url(output_url)
    numbers = info.sequence.numbers
    published = complete_frames(
        output_url, written, numbers, lambda n: copy_plate(source.frame_url(n), output.frame_url(n))
    )
    if signing is not None:
        published = sequence_sidecar(output_url, published, replaced, signing)
    if not passes:
        return published
    from pipeline.passes.layers import pass_header

    header = pass_header(info)  # the shot's, once: its OCIO config read once, not per frame filled in
    for name, (url, frames) in passes.items():
        published.passes[name] = complete_frames(
            url, frames, numbers, _EmptyPass(info, parse_sequence_url(url), name, header)
        )
    return published


class _EmptyPass:
    """Writes an empty pass frame (matte 0, face 0) with the source frame's header, for a frame not rendered."""

    def __init__(self, info: VideoInfo, pattern: SequencePattern, name: str, header: PassHeader) -> None:
        self.info, self.pattern, self.name, self.header = info, pattern, name, header

    def __call__(self, number: int) -> tuple[str, int]:
        return _empty_pass(self.info, number, self.pattern, self.name, self.header)


def _empty_pass(
    info: VideoInfo, number: int, pattern: SequencePattern, name: str, header: PassHeader
) -> tuple[str, int]:
    import numpy as np
    import OpenImageIO as oiio

    from pipeline.passes.layers import pass_dtype, sequence_pass_spec
    from pipeline.plates.frames import write_plate
    from pipeline.store import storage

    assert info.sequence is not None
    url = info.sequence.pattern.frame_url(number)
    with storage.fetched(url, suffix=f".{info.sequence.pattern.ext}") as path:
        image = oiio.ImageInput.open(path)
        if image is None:
            raise RecastError(f"{url}: cannot read its header ({oiio.geterror()})")
        plate_spec = oiio.ImageSpec(image.spec())
        image.close()
    # The plate's frames are read as ``sequence.dtype``: the same pass format as the rendered frames'.
    spec = sequence_pass_spec(plate_spec, name, info.sequence.dtype, header)
    zeros = np.zeros((info.height, info.width, spec.nchannels), pass_dtype(name, info.sequence.dtype))
    return write_plate(pattern.frame_url(number), zeros, spec)
