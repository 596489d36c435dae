"""Chunks an earlier run published, cut back out of the published output instead of rendered again.

Once a video shot is published its segments are removed (unless
``output.keep_segments``).  When the job is resubmitted with changed fixes, the
chunks no fix touches keep their render keys, and the packets those renders
made are in the published output byte for byte: the merge copies them (a
chunk's pass frames are published where it wrote them, and must still be there).  So they are cut back out by stream copy
(:mod:`pipeline.video.cut`), uploaded where their segments were, and committed
again with the new files' sizes and sha256s.  The chunk's review segment, which
the publish keeps, must still be there as recorded.

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
from collections.abc import Mapping, Sequence
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


@dataclass(frozen=True)
class PublishedMovies:
    """Where a video shot's output and its compositing passes' movies are published."""

    output_url: str
    pass_urls: Mapping[str, str]


def recover_chunks(
    manifest: JobManifest,
    shot: str,
    wanted: Sequence[WantedChunk],
    *,
    home: SegmentHome,
    movies: PublishedMovies,
) -> list[RenderRecord]:
    """The records of ``wanted`` chunks cut back out of ``movies``, their segments uploaded (not yet
    committed); empty when the published output cannot stand in for their segments."""
    record = _published(manifest, shot, movies.output_url)
    if record is None:
        return []
    keys = record["render_keys"]
    found = []
    for chunk in wanted:
        if chunk.index >= len(keys) or keys[chunk.index] != chunk.key:
            continue  # the published output holds another render of this chunk
        rec = manifest.render_record(shot, chunk.index, chunk.key, home)
        if rec is None or rec.frame_files or rec.frames != chunk.frames or not _review_kept(rec):
            continue
        if any(name not in movies.pass_urls for name in _layers(rec)) or not _frames_kept(rec):
            continue
        found.append((chunk, rec))
    if not found:
        return []
    names = ", ".join(str(chunk.index) for chunk, _ in found)
    try:
        out = _cut(found, record, movies)
    except RecastError as exc:
        manifest.set_aside(
            f"{shot} chunk(s) {names}: could not be cut from the published output ({exc}); rendered again"
        )
        return []
    logger.info("%s: chunk(s) %s cut back out of %s by stream copy", shot, names, movies.output_url)
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


def _layers(rec: RenderRecord) -> list[str]:
    """The record's compositing passes that are movies (each cut from its own); the review segment is
    kept as is, and pass frames where they were written."""
    return [
        name for name, entry in rec.passes.items() if name != REVIEW_PASS and isinstance(entry, VideoPass)
    ]


def _frames_kept(rec: RenderRecord) -> bool:
    """The chunk's pass frames (a video's matte and face EXRs) are all there at the sizes written."""
    return all(frames_intact(e.url, e.frames) for e in rec.passes.values() if isinstance(e, SequencePass))


def _review_kept(rec: RenderRecord) -> bool:
    """The chunk's review segment (if it has one) is there as recorded: the publish keeps them."""
    entry = rec.passes.get(REVIEW_PASS)
    if not isinstance(entry, VideoPass):
        return entry is None
    try:
        return storage.size(entry.url) == entry.bytes and sha256_url(entry.url) == entry.sha256
    except RecastError:
        return False


def _cut(
    found: list[tuple[WantedChunk, RenderRecord]], record: dict[str, Any], movies: PublishedMovies
) -> list[RenderRecord]:
    """Fetch each movie once (its sha256 checked), cut every chunk out of it, upload the cuts."""
    sources: dict[str, tuple[str, str]] = {"": (movies.output_url, record["output_sha256"])}
    published_passes = record.get("passes") or {}
    for name in {n for _, rec in found for n in _layers(rec)}:
        sha = published_passes.get(name)
        if not isinstance(sha, str):
            raise RecastError(f"pass {name!r} has no recorded sha256")
        sources[name] = (movies.pass_urls[name], sha)
    new: dict[int, dict[str, tuple[str, int, str]]] = {chunk.index: {} for chunk, _ in found}
    with tempfile.TemporaryDirectory(prefix="recast-recut-") as tmp:
        for n, (name, (url, sha)) in enumerate(sorted(sources.items())):
            local = fetch_verified(url, os.path.join(tmp, f"movie{n}{_ext(url)}"), sha)
            cuts = []
            for chunk, rec in found:
                target = rec.segment_url if not name else rec.passes[name].url
                cuts.append(
                    Cut(chunk.first, chunk.frames, os.path.join(tmp, f"{n}-{chunk.index}{_ext(target)}"))
                )
            counts = cut_segments(local, cuts, url=url)
            os.remove(local)
            for (chunk, rec), cut, count in zip(found, cuts, counts, strict=True):
                if count != chunk.frames:
                    raise RecastError(f"{url}: chunk {chunk.index} cut to {count} frames, not {chunk.frames}")
                target = rec.segment_url if not name else rec.passes[name].url
                size, digest = os.path.getsize(cut.path), sha256_file(cut.path)
                storage.publish_file(cut.path, target)
                new[chunk.index][name] = (target, size, digest)
    out = []
    for chunk, rec in found:
        files = new[chunk.index]
        _, size, digest = files[""]
        passes = dict(rec.passes)
        for name in _layers(rec):
            url, pass_size, pass_digest = files[name]
            passes[name] = VideoPass(url=url, bytes=pass_size, sha256=pass_digest)
        out.append(dataclasses.replace(rec, sha256=digest, bytes=size, passes=passes))
    return out


def _ext(url: str) -> str:
    return os.path.splitext(url.split("?", 1)[0])[1]
