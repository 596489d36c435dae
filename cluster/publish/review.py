"""A shot's review media, once its output is published and its QC concluded: the review movie
merged from the chunks' review segments with the QC flags burnt in, and the contact sheet.

The actors burn in what they know while rendering (shot, frame, timecode, identity); the flags
are decided by the driver only when the whole shot is rendered, so they are drawn here in a
second pass over the merged movie, which is small (at most ``output.review.max_width`` wide).
Review media obey ``output.if_exists`` as the outputs do (:class:`cluster.spec.review.IfExistsRule`):
``overwrite`` (or a resumed job: an earlier run of this very job wrote them) replaces them, each
atomically; otherwise each is created only if still absent, and one already there is left as it is
(:class:`ReviewKept`: a warning in the summary, the shot's output stays published).
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass

import cv2
import numpy as np

from cluster.publish.merge import Signing
from cluster.report.summary import ReviewOutputs
from cluster.spec.review import IfExistsRule
from pipeline.errors import RecastError, StorageError
from pipeline.qc.records import Flag
from pipeline.review import contact
from pipeline.review.frames import ReviewLook
from pipeline.review.movie import burn_flags, flag_lines, review_info
from pipeline.store import storage
from pipeline.video.probe import VideoInfo

logger = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class ReviewJob:
    """What :func:`publish_review` needs of one shot: its review segments (in chunk order, with their
    recorded sha256s), the source and output, the delivered frames, the flags and where to write."""

    shot: str
    look: ReviewLook
    segment_urls: list[str]
    segment_sha256: list[str]
    info: VideoInfo
    source_url: str
    output_url: str
    window: tuple[int, int] | None
    flags: tuple[Flag, ...]
    movie_url: str
    contact_url: str
    signing: Signing | None = None
    """The job's Content Credentials (:meth:`cluster.checks.provenance.JobProvenance.signing`): the
    review movie and contact sheet show AI-replaced faces too, so they are signed like the output."""

    @property
    def positions(self) -> range:
        """Source positions of the review movie's frames."""
        a, b = self.window if self.window is not None else (0, self.info.frame_count)
        return range(a, b)

    @property
    def numbers(self) -> list[int]:
        """Source frame numbers of the review movie's frames."""
        return [self.info.frame_number(p) for p in self.positions]


class ReviewKept(RecastError):
    """A review movie or contact sheet was already there and ``output.if_exists`` keeps it: not written."""


def publish_review(job: ReviewJob, remove_after: str | None = None, *, writes: IfExistsRule) -> ReviewOutputs:
    """Merge, burn in the flags, publish the movie; draw and publish the contact sheet.

    ``writes``: how a movie or contact sheet already there is met (``output.if_exists``): replaced, or
    left as it is (:class:`ReviewKept`, raised before anything is merged when either is there before,
    or when one appears meanwhile: each is then published create-only).

    ``remove_after``: the shot's segment folder, emptied once the review no longer needs it (whether
    the review was written or not) but for this review's own segments: they are small, and a
    resubmission that renders only some chunks again merges the review movie from them and the new
    ones (:mod:`cluster.state.recover`)."""
    from pipeline.video.merge import merge_segments

    try:
        if not writes.overwrite:
            for url in (job.movie_url, job.contact_url):
                if storage.exists(url):
                    raise ReviewKept(writes.left(url, "output.review.url"))
        numbers = job.numbers
        with tempfile.TemporaryDirectory(prefix="recast-review-") as tmp:
            merged, final = os.path.join(tmp, "merged.mp4"), os.path.join(tmp, "review.mp4")
            stats = merge_segments(
                job.segment_urls,
                review_info(job.info, job.look.size),
                merged,
                audio_source_url=None,
                window=job.window,
                segment_sha256=job.segment_sha256,
            )
            flagged = len(flag_lines(job.flags, numbers))
            if flagged:
                frames = burn_flags(merged, final, numbers, job.flags)
            else:  # nothing to burn in: the merged movie is the review movie
                final, frames = merged, stats.frames
            final = _signed(final, os.path.join(tmp, "signed.mp4"), job.movie_url, job.signing)
            with _kept(job.movie_url, writes):
                storage.publish_file(final, job.movie_url, overwrite=writes.overwrite)
            sheet = os.path.join(tmp, "contact.png")
            with open(sheet, "wb") as fh:
                fh.write(_contact(job))
            sheet = _signed(sheet, os.path.join(tmp, "signed.png"), job.contact_url, job.signing)
            with _kept(job.contact_url, writes):
                storage.publish_file(sheet, job.contact_url, overwrite=writes.overwrite)
        return ReviewOutputs(job.movie_url, job.contact_url, frames=frames, flagged_frames=flagged)
    finally:
        if remove_after is not None:
            prune_segments(remove_after, keep=set(job.segment_urls))


@contextlib.contextmanager
def _kept(url: str, writes: IfExistsRule) -> Iterator[None]:
    """A create-only write of ``url`` that found it there (it appeared meanwhile): :class:`ReviewKept`."""
    try:
        yield
    except StorageError as exc:
        if exc.reason != storage.ALREADY_EXISTS:
            raise
        raise ReviewKept(writes.left(url, "output.review.url")) from exc


def _signed(local: str, signed: str, url: str, signing: Signing | None) -> str:
    """``local`` with the job's Content Credentials embedded (in ``signed``), titled by ``url``'s name;
    ``local`` itself without signing."""
    if signing is None:
        return local
    from pipeline.provenance.credentials import sign_video

    info = signing[0].model_copy(update={"title": url.rstrip("/").rsplit("/", 1)[-1]})
    sign_video(local, signed, info, signing[1])
    return signed


def prune_segments(folder: str, *, keep: set[str]) -> None:
    """Remove everything in a shot's segment ``folder`` but the files ``keep`` names (the folder itself
    too when nothing is kept); a failure is logged."""
    try:
        if not keep:
            storage.remove(folder, recursive=True)
            return
        names = {_name(url) for url in keep}
        for url in storage.listdir(folder):
            if _name(url) not in names:
                storage.remove(url, recursive=True)
    except RecastError as exc:
        logger.warning("could not remove the segments in %s: %s", folder, exc)


def _name(url: str) -> str:
    return url.split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1]


def _contact(job: ReviewJob) -> bytes:
    """The contact sheet: each flag's worst frame before and after, or a few frames and a note."""
    from pipeline.thumbnails import thumbnails

    offset = job.positions.start
    numbers = job.numbers
    position = {n: p for p, n in zip(job.positions, numbers, strict=True)}
    shown = [(f, n) for f, n in contact.flag_frames(job.flags) if n in position]
    wanted = [position[n] for _, n in shown] if shown else [position[n] for n in contact.even_frames(numbers)]
    thumbs = {
        t.frame: t
        for t in thumbnails(
            job.source_url, job.output_url, job.info, wanted, contact.CELL_WIDTH, offset=offset
        )
    }
    rows: list[contact.SheetRow] = []
    if shown:
        for flag, number in shown:
            thumb = thumbs[position[number]]
            rows.append(
                contact.SheetRow(
                    contact.flag_label(flag, number), _picture(thumb.before_jpeg), _picture(thumb.after_jpeg)
                )
            )
    else:
        for p in wanted:
            rows.append(
                contact.SheetRow(
                    f"frame {job.info.frame_number(p)}",
                    _picture(thumbs[p].before_jpeg),
                    _picture(thumbs[p].after_jpeg),
                )
            )
    return contact.contact_sheet(
        f"{job.shot}: before | after", rows, note=None if shown else contact.NO_FLAGS
    )


def _picture(jpeg: bytes) -> np.ndarray:
    bgr = cv2.imdecode(np.frombuffer(jpeg, np.uint8), cv2.IMREAD_COLOR)
    if bgr is None:
        raise RecastError("a thumbnail of the contact sheet could not be decoded")
    return cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)
