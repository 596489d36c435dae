"""The report links each shot's review movie and contact sheet, and the job's review playlist once at the
top: relative to the report where they sit on its disk or in its bucket, else their URL as text; never
with a URL's credentials."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path

import pytest

from cluster.report.build import build_report, write_report
from cluster.report.links import media_link
from cluster.report.summary import JobSummary, ReviewOutputs
from tests.cluster.report.browser import check_page, find_chromium
from tests.cluster.report.sample_report import job_summary

KEY = "AKIAIOSFODNN7EXAMPLE"


class Anchors(HTMLParser):
    """Every ``<a>``'s href and text, and the text of the page before the first shot table."""

    def __init__(self) -> None:
        super().__init__()
        self.links: list[tuple[str, str]] = []
        self._href: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self._href = dict(attrs).get("href") or ""
            self.links.append((self._href, ""))

    def handle_data(self, data: str) -> None:
        if self._href is not None:
            href, text = self.links[-1]
            self.links[-1] = (href, text + data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "a":
            self._href = None


def anchors(page: str) -> dict[str, str]:
    """Link text -> href (each label once per shot here)."""
    parser = Anchors()
    parser.feed(page)
    return {text: href for href, text in parser.links}


def reviewed(work: str, movie: str, playlist: str | None) -> JobSummary:
    summary = job_summary("out.mp4")
    summary.work_url = work
    contact = movie.removesuffix(".mp4") + "_contact.png"
    summary.shots[0].review = ReviewOutputs(movie, contact, frames=30, flagged_frames=4)
    summary.review_timeline_url = playlist
    return summary


def test_media_beside_the_report_on_disk_is_linked_relatively() -> None:
    summary = reviewed(
        "/jobs/ep101/work", "/jobs/ep101/review/sc010_review.mp4", "/jobs/ep101/review/dailies.otio"
    )
    report, page = build_report(summary.redacted())
    links = anchors(page)
    assert links["review movie"] == "../review/sc010_review.mp4"
    assert links["contact sheet"] == "../review/sc010_review_contact.png"
    assert links["review playlist"] == "../review/dailies.otio"
    assert page.count("review playlist") == 1 and page.index("review playlist") < page.index("<h2>Shots</h2>")
    assert "30 frames, 4 flagged" in page and "<th>Review</th>" in page
    assert report["job"]["review_timeline_url"] == "/jobs/ep101/review/dailies.otio"
    assert report["shots"][0]["review_media"]["movie_url"] == "/jobs/ep101/review/sc010_review.mp4"


def test_media_in_the_same_bucket_is_linked_without_credentials() -> None:
    summary = reviewed(
        f"s3://{KEY}:pw@studio/jobs/ep101",
        f"s3://{KEY}:pw@studio/review/ep 101/sc010#1.mp4",
        f"s3://{KEY}:pw@studio/review/dailies.otio",
    )
    report, page = build_report(summary.redacted())
    links = anchors(page)
    assert links["review movie"] == "../../review/ep%20101/sc010%231.mp4"
    assert links["review playlist"] == "../../review/dailies.otio"
    assert KEY not in page and KEY not in json.dumps(report) and "REDACTED" not in "".join(links.values())
    # Unredacted, the link still carries no credentials (the report is also built from a summary as is).
    assert media_link(f"s3://{KEY}:pw@studio/a/b.mp4", "s3://studio/jobs").href == "../a/b.mp4"


def test_media_elsewhere_is_shown_as_text_not_linked() -> None:
    summary = reviewed(
        "s3://studio/jobs/ep101",
        f"s3://{KEY}:pw@dailies/ep101/sc010_review.mp4",
        "gs://studio/review/dailies.otio",
    )
    _, page = build_report(summary.redacted())
    assert anchors(page) == {}
    assert (
        "s3://dailies/ep101/sc010_review.mp4" in page
        and "s3://dailies/ep101/sc010_review_contact.png" in page
    )
    assert "gs://studio/review/dailies.otio" in page and KEY not in page
    signed = media_link("s3://studio/r/a.mp4?X-Amz-Signature=abcdef", "s3://studio/jobs")
    assert signed.href is None and "abcdef" not in signed.text


def test_no_review_media_no_links_or_column() -> None:
    _, page = build_report(job_summary("out.mp4"))
    assert "<th>Review</th>" not in page and "review playlist" not in page and "<a " not in page


def test_links_open_the_files_beside_the_report_in_chromium(tmp_path: Path) -> None:
    if find_chromium() is None:
        pytest.skip("no Chromium on PATH (Debian package: chromium)")
    review = tmp_path / "review"
    review.mkdir()
    for name in ("sc010_review.mp4", "sc010_review_contact.png", "dailies.otio"):
        (review / name).write_bytes(b"x")
    summary = reviewed(str(tmp_path / "work"), str(review / "sc010_review.mp4"), str(review / "dailies.otio"))
    report, page = build_report(summary.redacted())
    _, html_url = write_report(str(tmp_path / "work"), report, page)
    probe = "JSON.stringify(Array.from(document.links).map(a => [a.textContent, a.href]))"
    check = check_page(html_url, probe=probe)
    assert check.errors == [] and check.requests == []
    hrefs = dict(check.probe)
    assert hrefs == {
        "review playlist": (review / "dailies.otio").as_uri(),
        "review movie": (review / "sc010_review.mp4").as_uri(),
        "contact sheet": (review / "sc010_review_contact.png").as_uri(),
    }
