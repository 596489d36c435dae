"""The ledger: every read and write of a job's manifest, in the words of the driver.

The driver asks the ledger what an earlier run finished ("is this chunk's
analysis committed for this key?") and tells it what this run finished.  Reads
answer None when the job is not resuming, so the driver never asks itself
whether it is.  A failed write is logged, never fatal, except a segment's record,
which is the commit of that chunk: its error is returned so the chunk is retried.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from typing import Any

from cluster.spec.job import JobSpec
from cluster.state.keys import AnalysisKey, RenderKey, ShotKey, TrackKey
from cluster.state.manifest import JobManifest, RenderRecord, SegmentHome, digest
from cluster.state.recover import WantedChunk, recover_chunks
from pipeline.errors import RecastError
from pipeline.geometry.types import Face
from pipeline.store import storage
from pipeline.store.redact import redact_text, strip_userinfo
from pipeline.tracking.tracker import TrackerState

logger = logging.getLogger(__name__)


class Ledger:
    """Reads and commits one job's manifest records (``<work_url>/manifest``)."""

    def __init__(
        self, manifest: JobManifest, *, resumed: bool, guard: Callable[[bool], None] | None = None
    ) -> None:
        self.manifest = manifest
        self.resumed = resumed
        self._guard = guard
        """Raises when this driver may no longer write (its lease is lost); ``True``: ask the store."""
        self._broken_chains: set[str] = set()
        """Shots whose tracker chain was recomputed from some chunk on: later track records are stale."""
        self.records_written = 0

    # -- job
    def write_job(
        self,
        spec: JobSpec,
        pack_hash: str,
        identities: str,
        shot_keys: dict[str, ShotKey],
        *,
        fixes: dict[str, list[dict[str, Any]]] | None = None,
    ) -> None:
        """``job.json``: which spec and pack the records were made for (the keys decide reuse), and the
        shots' fixes (:func:`cluster.spec.fixes.fix_records`; the key only when some shot has fixes)."""
        previous = self.manifest.read_job() if self.resumed else None
        spec_hash = digest(spec)
        if previous is not None and previous.get("spec_hash") != spec_hash:
            logger.info(
                "job %s: the spec changed since the last run; only the affected chunks are redone",
                spec.job_id,
            )
        self._write(
            "job record",
            self.manifest.write_job,
            {
                "job_id": spec.job_id,
                "spec_hash": spec_hash,
                "pack_hash": pack_hash,
                "identities": identities,
                "runs": int(previous.get("runs", 0)) + 1 if previous else 1,
                "shots": dict(shot_keys),
                **({"fixes": fixes} if fixes else {}),
            },
            fatal=True,
        )

    # -- reading ahead, compaction (cluster.state.compact)
    def prefetch(self, shots: list[str]) -> None:
        """A resume: read these shots' records ahead, in this order, several at once (call once, before
        the first read; nothing is read when the job is not resuming)."""
        if self.resumed:
            self.manifest.prefetch(shots)

    def compact_shot(self, shot: str) -> None:
        """Copy the published ``shot``'s chunk records into one object, so a resume reads it in one go
        (call after :meth:`shot_published`).  Not fatal: without it the records are read one by one."""
        try:
            self.manifest.compact_shot(shot)
        except RecastError as exc:
            logger.warning("could not compact the records of %s: %s", shot, exc)

    # -- analysis
    def analysis(self, shot: str, index: int, key: AnalysisKey, frames: int) -> list[list[Face]] | None:
        """The faces an earlier run committed for chunk ``index`` under ``key``, if intact."""
        if not self.resumed:
            return None
        faces = self.manifest.read_analysis(shot, index, key)
        if faces is None or len(faces) != frames:
            return None
        return faces

    def commit_analysis(
        self, shot: str, index: int, key: AnalysisKey, faces: list[list[Face]], actor: str
    ) -> None:
        # Not fatal: the chunk is simply analysed again if the job is resubmitted.
        self._write(
            f"analysis of {shot} chunk {index}", self.manifest.write_analysis, shot, index, key, faces, actor
        )

    # -- tracking
    def tracking(
        self, shot: str, index: int, key: TrackKey, frames: int
    ) -> tuple[list[list[int]], TrackerState] | None:
        """Track ids and the state out of chunk ``index`` if an earlier run committed them for ``key``.

        Once one chunk of a shot is tracked again, every later record of that
        shot is stale (its state in came from the old chain): the chain resumes
        from the last committed chunk only.
        """
        if not self.resumed or shot in self._broken_chains:
            return None
        record = self.manifest.read_track(shot, index)
        if record is None or record.get("key") != key:
            self._broken_chains.add(shot)
            return None
        try:
            ids = [list(map(int, f)) for f in record["track_ids"]]
            state = TrackerState.from_dict(record["state_out"])
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
            # An old or foreign format: the chain is tracked again from here.
            self.manifest.set_aside(f"{shot} chunk {index}: track record is stale ({exc!r}); tracked again")
            self._broken_chains.add(shot)
            return None
        if len(ids) != frames:
            self._broken_chains.add(shot)
            return None
        return ids, state

    def commit_tracking(
        self,
        shot: str,
        index: int,
        key: TrackKey,
        state_in: dict[str, Any] | None,
        state_out: TrackerState,
        track_ids: list[list[int]],
    ) -> None:
        self._broken_chains.add(shot)
        self._write(
            f"tracking of {shot} chunk {index}",
            self.manifest.write_track,
            shot,
            index,
            key=key,
            state_in=state_in,
            state_out=state_out.to_dict(),
            track_ids=track_ids,
        )

    # -- render
    def segment(self, shot: str, index: int, key: RenderKey, home: SegmentHome) -> RenderRecord | None:
        """The segment an earlier run committed for chunk ``index`` under ``key``, if still there, in
        ``home`` and unchanged (its sha256 checked)."""
        if not self.resumed:
            return None
        return self.manifest.read_render(shot, index, key, home)

    def commit_segment(self, shot: str, record: RenderRecord) -> BaseException | None:
        """Check the uploaded segment's size, then record it (the commit); the error if it is not right."""
        if self._guard is not None:
            self._guard(False)
        try:
            if record.frame_files:
                if not record.files_intact():
                    return RecastError(
                        f"{record.segment_url}: frames missing or not the size the actor wrote"
                    )
            elif (size := storage.size(record.segment_url)) != record.bytes:
                return RecastError(
                    f"{record.segment_url}: uploaded {size} bytes, the actor wrote {record.bytes}"
                )
        except RecastError as exc:
            return exc
        try:
            self.manifest.write_render(shot, _without_credentials(record))
        except RecastError as exc:
            return exc
        self.records_written += 1
        return None

    def recovered_segments(
        self, shot: str, wanted: list[WantedChunk], *, home: SegmentHome, output_url: str
    ) -> dict[int, RenderRecord]:
        """Chunks whose segments are gone, cut back out of the shot's published output and committed
        again (:mod:`cluster.state.recover`); chunk index -> its new record."""
        if not self.resumed or not wanted:
            return {}
        out = {}
        for record in recover_chunks(self.manifest, shot, wanted, home=home, output_url=output_url):
            error = self.commit_segment(shot, record)
            if error is not None:
                self.manifest.set_aside(f"{shot} chunk {record.chunk}: {error}; rendered again")
                continue
            out[record.chunk] = record
        return out

    # -- shot
    def published_output(self, shot: str, spec_key: ShotKey, output_url: str) -> dict[str, Any] | None:
        """The shot record if this job published ``output_url`` for ``spec_key``, unchanged since."""
        if not self.resumed:
            return None
        return self.manifest.published_output(shot, spec_key, strip_userinfo(output_url))

    def shot_published(
        self,
        shot: str,
        *,
        spec_key: ShotKey,
        output_url: str,
        sha256: str,
        fingerprint: dict[str, Any],
        frames: int,
        render_keys: list[RenderKey],
        content_sha256: str | None = None,
        credentials_url: str | None = None,
        frame_sha256: dict[str, str] | None = None,
        passes: dict[str, str] | None = None,
        pass_fingerprints: dict[str, dict[str, Any]] | None = None,
        review_flags: list[dict[str, Any]] | None = None,
    ) -> None:
        record: dict[str, Any] = {
            "status": "published",
            "spec_key": spec_key,
            "output_url": strip_userinfo(output_url),
            "output_sha256": sha256,
            "output_fingerprint": fingerprint,
            "frames": frames,
            "render_keys": render_keys,
        }
        if content_sha256 is not None and content_sha256 != sha256:
            record["content_sha256"] = content_sha256  # a video's, before its credentials were embedded
        if credentials_url is not None:
            record["credentials_url"] = strip_userinfo(credentials_url)
        if frame_sha256 is not None:
            record["frame_sha256"] = frame_sha256  # an image sequence: every frame's, by number
        if passes:
            # pass -> sha256 (matte, face) or URL (tracks files)
            record["passes"] = {name: strip_userinfo(value) for name, value in passes.items()}
        if pass_fingerprints:
            # pass frames' URL -> their listing's fingerprint: a frame lost since is noticed on resume.
            record["pass_fingerprints"] = {strip_userinfo(u): f for u, f in pass_fingerprints.items()}
        if review_flags is not None:
            # output.review: the flags its movie burns in, so a resume can make it again from records.
            record["review_flags"] = review_flags
        self._write(f"the published output of {shot}", self.manifest.write_shot, shot, record, fresh=True)

    def shot_failed(self, shot: str, *, spec_key: ShotKey, error: str) -> None:
        record = {"status": "failed", "error": redact_text(error), "spec_key": spec_key}
        self._write(f"the failure of {shot}", self.manifest.write_shot, shot, record, fresh=True)

    def _write(
        self, what: str, write: Any, *args: Any, fatal: bool = False, fresh: bool = False, **kwargs: Any
    ) -> None:
        if self._guard is not None:
            self._guard(fresh or fatal)  # shot and job records: the lease is read again first
        try:
            write(*args, **kwargs)
        except RecastError as exc:
            if fatal:
                raise
            # In the summary's warnings (a planner actor's reach the driver with its notes).
            self.manifest.set_aside(f"could not record {what} ({exc}); a later run of the job does it again")
            return
        self.records_written += 1


def _without_credentials(record: RenderRecord) -> RenderRecord:
    """``record`` with no userinfo in its URLs: records are kept, and credentials come from the environment."""
    passes = {name: dataclasses.replace(p, url=strip_userinfo(p.url)) for name, p in record.passes.items()}
    return dataclasses.replace(record, segment_url=strip_userinfo(record.segment_url), passes=passes)
