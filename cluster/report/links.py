"""Links from the report to the media beside it (review movies, contact sheets, the playlist).

The report is one file in the job's work area (``report.html``), opened from a disk or from the
bucket's files as they are laid out.  A file on the same disk, or in the same bucket, is linked by
its path relative to the report, which stays right when the work area and the media are copied or
synced together; anything else (another bucket, another store) is shown as its URL in text, not a
link a browser could not follow.  No link or text carries a URL's credentials
(:func:`~pipeline.store.redact.strip_userinfo`, then
:func:`~pipeline.store.redact.redact_text`), and a URL with a query (a signed URL) is not linked.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from urllib.parse import quote

from pipeline.errors import RecastError
from pipeline.store import urls
from pipeline.store.redact import redact_text, strip_userinfo


@dataclass(frozen=True)
class MediaLink:
    """How the report shows one file: ``href`` relative to the report (None: text only) and its URL."""

    href: str | None
    text: str


def media_link(url: str, report_dir: str) -> MediaLink:
    """``url`` as the report in folder ``report_dir`` (its work area) shows it."""
    text = redact_text(strip_userinfo(url))
    here, there = _place(report_dir), _place(url)
    if here is None or there is None or here[0] != there[0] or "?" in url:
        return MediaLink(None, text)
    return MediaLink(quote(posixpath.relpath(there[1], here[1])), text)


def _place(url: str) -> tuple[str, str] | None:
    """(store, absolute path in it): ``("", "/a/b")`` on the disk, ``("s3://bucket", "/key")`` in a bucket;
    None when ``url`` names no place Recast can write."""
    try:
        found = urls.canonical(strip_userinfo(url))
    except RecastError:
        return None
    if urls.is_local(found):
        return "", found
    scheme = urls.scheme(found) or ""
    bucket, _, key = found[len(scheme) + 3 :].partition("/")
    return f"{scheme}://{bucket}", "/" + key
