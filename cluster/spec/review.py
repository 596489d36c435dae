"""``output.review``: a review movie per shot (H.264 dailies with burn-ins), and its contact sheet;
and how the files a job writes once its shots are published meet files already there
(:class:`IfExistsRule`)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from pydantic import Field, field_validator

from pipeline.configbase import Frozen
from pipeline.errors import RecastError, StorageError
from pipeline.store.atomic import ALREADY_EXISTS

REVIEW_EXTENSION = ".mp4"
CONTACT_SUFFIX = "_contact.png"


class ReviewSpec(Frozen):
    """A review movie per shot: plate and output with burn-ins, and a contact sheet beside it."""

    url: str
    """Each shot's review movie: a template with ``{shot}`` (and optionally ``{job_id}``) ending in
    ``.mp4`` (H.264, Rec.709, 8-bit 4:2:0).  The contact sheet is written beside it as
    ``<url without .mp4>_contact.png``."""
    layout: Literal["side_by_side", "wipe", "after"] = "side_by_side"
    """``side_by_side`` (plate on the left, output on the right), ``wipe`` (the left half of the plate,
    the right half of the output, a thin line between) or ``after`` (the output alone)."""
    max_width: int = Field(default=1920, ge=64, le=8192)
    """The review movie's width at most, in pixels (the layout is scaled down to fit, never up)."""

    @field_validator("url")
    @classmethod
    def _template(cls, url: str) -> str:
        if not url.lower().endswith(REVIEW_EXTENSION):
            raise ValueError(f"must end with {REVIEW_EXTENSION} (review movies are H.264 MP4), got {url!r}")
        if "{shot}" not in url:
            raise ValueError("needs a {shot} placeholder (one review movie per shot)")
        unknown = set(re.findall(r"{([^}]*)}", url)) - {"shot", "job_id"}
        if unknown:
            raise ValueError(f"unknown placeholder(s) {sorted(unknown)}; use {{shot}} and {{job_id}}")
        return url

    def movie_url(self, shot: str, job_id: str) -> str:
        """Shot ``shot``'s review movie."""
        return self.url.replace("{job_id}", job_id).replace("{shot}", shot)


def contact_url(movie_url: str) -> str:
    """The contact sheet beside the review movie ``movie_url``."""
    return movie_url[: -len(REVIEW_EXTENSION)] + CONTACT_SUFFIX


@dataclass(frozen=True, kw_only=True)
class IfExistsRule:
    """``output.if_exists`` for the files a job writes once its shots are published: each shot's review
    movie and contact sheet (``output.review.url``), the review playlist (``output.review_timeline_url``)
    and the cut written back (``output.timeline_url``).

    ``overwrite``, or a resumed job (an earlier run of this very job wrote them: ``resumed``), replaces
    one atomically.  Otherwise each is created only if still absent: with ``fail`` one that exists is
    refused before Ray (:func:`cluster.checks.prepare.check_review_media`), with ``skip`` it is left as
    it is and the summary warns; one that appeared while the job ran is left untouched (:meth:`left`).
    """

    if_exists: Literal["fail", "skip", "overwrite"]
    resumed: bool

    @property
    def overwrite(self) -> bool:
        """Whether a file already there is replaced."""
        return self.if_exists == "overwrite" or self.resumed

    @property
    def skips(self) -> bool:
        """Whether a file already there is left as it is, with a warning (not a failure)."""
        return self.if_exists == "skip" and not self.resumed

    def left(self, url: str, field: str) -> str:
        """Why ``url`` (named by the spec's ``field``) was not written: it was there."""
        if self.skips:
            return f"{url} ({field}) exists: left as it is (if_exists: skip)"
        return (
            f"{url} ({field}) appeared after the job's checks; with output.if_exists: {self.if_exists} "
            "it is left untouched, not overwritten"
        )

    def failed_write(self, exc: RecastError, url: str, field: str) -> tuple[str, bool]:
        """What a create-only write of ``url`` that raised ``exc`` comes to: (what to say, whether it is
        a warning).  A file that appeared after the checks is left untouched (:meth:`left`): a warning
        with ``skip``, else a failure; any other error is a failure naming ``field``."""
        if isinstance(exc, StorageError) and exc.reason == ALREADY_EXISTS:
            return self.left(url, field), self.skips
        return f"{field}: {exc}", False
