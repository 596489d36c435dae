"""Chunks an earlier run published, cut back out of the published output instead of rendered again.

Once a video shot is published its segments are removed (unless
``output.keep_segments``).  When the job is resubmitted with changed fixes, the
chunks no fix touches keep their render keys, and the packets those renders
made are in the published output byte for byte: the merge copies them.  So they
are cut back out by stream copy (:mod:`pipeline.video.cut`), uploaded where their
segments were, and committed again with the new files' sizes and sha256s.  The
chunk's other files are not cut: its review segment, which the publish keeps,
and its matte and face pass frames, published where it wrote them, must still be
there as recorded.

A chunk is cut out only when everything says the output holds exactly its
render: the shot's record names this output URL, the output's fingerprint has
not changed since, its sha256 (read in full while fetched) is the recorded one,
the chunk's key is the key the published output was made with, and the record
sits where this job writes segments.  Anything else and the chunk is rendered
again; a failure while cutting is a warning in the summary, never a wrong frame.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from actors.results import SequencePass, VideoPass
from actors.review import REVIEW_PASS
from cluster.state.manifest import JobManifest, RenderRecord, SegmentHome
from cluster.state.segment_record import frames_intact
from pipeline.errors import RecastError
from pipeline.store import storage
from pipeline.store.hashing import fetch_verified, sha256_file, sha256_url
from pipeline.store.redact import strip_userinfo
from pipeline.video.cut import Cut, cut_segments

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class WantedChunk:
    """A chunk to render under ``key`` whose segment is gone: output frames ``[first, first + frames)``."""

    index: int
    key: str
    first: int
    frames: int


def recover_chunks(
    manifest: JobManifest, shot: str, wanted: Sequence[WantedChunk], *, home: SegmentHome, output_url: str
) -> list[RenderRecord]:
    """The records of ``wanted`` chunks cut back out of the shot's published output ``output_url``, their
    segments uploaded (not yet committed); empty when that output cannot stand in for their segments."""
    record = _published(manifest, shot, output_url)
    if record is None:
        return []
    keys = record["render_keys"]
    found = []
    for chunk in wanted:
        if chunk.index >= len(keys) or keys[chunk.index] != chunk.key:
            continue  # the published output holds another render of this chunk
        rec = manifest.render_record(shot, chunk.index, chunk.key, home)
        if rec is None or rec.frame_files or rec.frames != chunk.frames or not _passes_kept(rec):
            continue
        found.append((chunk, rec))
    if not found:
        return []
    names = ", ".join(str(chunk.index) for chunk, _ in found)
    try:
        out = _cut(found, output_url=output_url, sha256=record["output_sha256"])
    except RecastError as exc:
        manifest.set_aside(
            f"{shot} chunk(s) {names}: could not be cut from the published output ({exc}); rendered again"
        )
        return []
    logger.info("%s: chunk(s) %s cut back out of %s by stream copy", shot, names, output_url)
    return out


def _published(manifest: JobManifest, shot: str, output_url: str) -> dict[str, Any] | None:
    """The shot's record if it says ``output_url`` was published (by any spec of the shot: the fixes
    changed) and the output is unchanged since, a video's with the render keys it was made with."""
    if _ext(output_url).lower() == ".mxf":  # its demuxed codec headers may not be the segments' own
        return None
    record = manifest.published_output(shot, None, strip_userinfo(output_url))
    if (
        record is None
        or not isinstance(record.get("render_keys"), list)
        or record.get("frame_sha256") is not None
    ):
        return None
    return record


def _passes_kept(rec: RenderRecord) -> bool:
    """The chunk's passes are all still there as recorded: its review segment (the publish keeps them)
    and its pass frames (a video's matte and face EXRs, where it wrote them).  Any other pass (a pass
    movie of an earlier Recast) cannot be cut from the output: the chunk is rendered again."""
    for name, entry in rec.passes.items():
        if isinstance(entry, SequencePass):
            if not frames_intact(entry.url, entry.frames):
                return False
        elif name != REVIEW_PASS or not _segment_kept(entry):
            return False
    return True


def _segment_kept(entry: VideoPass) -> bool:
    try:
        return storage.size(entry.url) == entry.bytes and sha256_url(entry.url) == entry.sha256
    except RecastError:
        return False


def _cut(
    found: list[tuple[WantedChunk, RenderRecord]], *, output_url: str, sha256: str
) -> list[RenderRecord]:
    """Fetch the output once (its sha256 checked), cut every chunk out of it, upload the cuts."""
    with tempfile.TemporaryDirectory(prefix="recast-recut-") as tmp:
        local = fetch_verified(output_url, os.path.join(tmp, f"output{_ext(output_url)}"), sha256)
        cuts = [
            Cut(chunk.first, chunk.frames, os.path.join(tmp, f"{chunk.index}{_ext(rec.segment_url)}"))
            for chunk, rec in found
        ]
        counts = cut_segments(local, cuts, url=output_url)
        os.remove(local)
        out = []
        for (chunk, rec), cut, count in zip(found, cuts, counts, strict=True):
            if count != chunk.frames:
                raise RecastError(
                    f"{output_url}: chunk {chunk.index} cut to {count} frames, not {chunk.frames}"
                )
            size, digest = os.path.getsize(cut.path), sha256_file(cut.path)
            storage.publish_file(cut.path, rec.segment_url)
            out.append(dataclasses.replace(rec, sha256=digest, bytes=size))
    return out


def _ext(url: str) -> str:
    return os.path.splitext(url.split("?", 1)[0])[1]
