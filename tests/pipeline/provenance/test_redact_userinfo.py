"""URL userinfo is redacted whole however it is spelled (issue 29, finding 7): spaces, quotes, angle
brackets, newlines, percent-encoding, several '@' - in free text, in the output streams, and by
``strip_userinfo``; a host and port, an IPv6 literal and a bucket followed by a colon are kept."""

from __future__ import annotations

import io

import pytest

from pipeline.store.redact import REDACTED, RedactingStream, redact_text, strip_userinfo

SPELLED = [
    "s3://svcuser:hunter2 SECRETTAIL@bucket/x.mp4",
    'url: "s3://svcuser:hunter2 SECRETTAIL@bucket/x.mp4"',
    "s3://svcuser:'hunter2 SECRETTAIL'@bucket/x.mp4",
    "s3://<svcuser:hunter2 SECRETTAIL>@bucket/x.mp4",
    "s3://svcuser:<hunter2/SECRETTAIL>@bucket/x.mp4",
    "s3://svcuser:hunter2\nSECRETTAIL@bucket/x.mp4",
    "s3://svcuser:hunter2\r\n  SECRETTAIL@bucket/x.mp4",
    "s3://svcuser%3Ahunter2%20SECRETTAIL@bucket/x.mp4",
    "s3://svcuser:hunter2@SECRETTAIL @bucket/x.mp4",
    "s3://svcuser hunter2 SECRETTAIL@bucket/x.mp4",
]


@pytest.mark.parametrize("text", SPELLED, ids=range(len(SPELLED)))
def test_userinfo_redacted_whole(text: str) -> None:
    out = redact_text(f"cannot open {text}: not found")
    for secret in ("svcuser", "hunter2", "SECRETTAIL"):
        assert secret not in out, out
    assert f"{REDACTED}@bucket/x.mp4" in out and out.endswith(": not found"), out
    assert redact_text(out) == out


@pytest.mark.parametrize("text", SPELLED[:6], ids=range(6))
def test_strip_userinfo_takes_the_same_reading(text: str) -> None:
    url = text.removeprefix('url: "').rstrip('"')
    assert strip_userinfo(url) == "s3://bucket/x.mp4"


def test_percent_encoded_url_inside_a_query() -> None:
    out = redact_text("https://app.example/login?next=https%3A%2F%2Fsvcuser%3Ahunter2%40host%2Fx&v=1")
    assert "hunter2" not in out and "svcuser" not in out, out
    assert out.startswith("https://app.example/login?next=https%3A%2F%2F") and "%40host%2Fx&v=1" in out


def test_password_without_its_at_sign_in_view() -> None:
    # A message cut before the '@' (or a second URL after it): the user:password part still goes.
    assert redact_text("s3://svcuser:hunter2") == f"s3://{REDACTED}"
    out = redact_text("s3://svcuser:hunter2 then s3://other/x.mp4")
    assert "hunter2" not in out and "s3://other/x.mp4" in out, out


def test_stream_redacts_a_message_written_whole_across_lines() -> None:
    target = io.StringIO()
    stream = RedactingStream(target)
    print("recast: bad job spec: s3://svcuser:hunter2\nSECRETTAIL@bucket/x.mp4: credentials", file=stream)
    stream.flush()
    assert "hunter2" not in target.getvalue() and "SECRETTAIL" not in target.getvalue(), target.getvalue()


@pytest.mark.parametrize(
    "text",
    [
        "http://[::1]:8080/x@2x.mov",
        "https://host.example:8443/a b@c",
        "s3://bucket: not found",
        "s3://bucket/sh010@2x.mp4 and mail ops@example.com",
        "file:///tmp/a:b/c@d.exr",
    ],
)
def test_plain_urls_kept(text: str) -> None:
    assert redact_text(text) == text
