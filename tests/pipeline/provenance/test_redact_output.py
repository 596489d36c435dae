"""What a process writes (stdout, stderr, every log handler) is redacted, and recorded URLs lose their userinfo."""

from __future__ import annotations

import io
import logging
import sys

import pytest

from pipeline.store.redact import (
    REDACTED,
    RedactingFilter,
    RedactingStream,
    install_log_redaction,
    redact_process_output,
    strip_userinfo,
)

PASSWORD = "p@ss/w0rd@SECRET"
URL = f"s3://AKIAIOSFODNN7EXAMPLE:{PASSWORD}@plates/sh010.mov"


def test_stream_redacts_lines_written_in_pieces() -> None:
    target = io.StringIO()
    stream = RedactingStream(target)
    stream.write("opening s3://user:p@")  # a credential split across writes is held back ...
    assert target.getvalue() == ""
    stream.write("ss@word@host/x\nAuthorization: Basic dXNlcjpwYXNz")
    assert target.getvalue() == f"opening s3://{REDACTED}@host/x\n"
    stream.flush()  # ... and what is left is redacted when flushed
    assert target.getvalue().endswith(f"Authorization: Basic {REDACTED}")
    print('password="two words"', file=stream)
    assert 'password="' + REDACTED + '"\n' in target.getvalue()
    assert "dXNlcjpwYXNz" not in target.getvalue() and "two words" not in target.getvalue()


def test_process_output_and_the_ray_logger_are_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    out, err = io.StringIO(), io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(sys, "stderr", err)
    # As in a Ray actor: the root logger has no handler (records go to logging.lastResort,
    # which writes to sys.stderr), and Ray's logger has its own handler, not propagating.
    monkeypatch.setattr(logging.getLogger(), "handlers", [])
    ray_logger = logging.getLogger("ray")
    ray_stream = io.StringIO()
    handler = logging.StreamHandler(ray_stream)
    monkeypatch.setattr(ray_logger, "handlers", [handler])
    monkeypatch.setattr(ray_logger, "propagate", False)
    try:
        redact_process_output()
        redact_process_output()  # idempotent: one wrapper, one filter per handler
        assert isinstance(sys.stdout, RedactingStream) and sys.stdout.target is out
        assert isinstance(sys.stderr, RedactingStream) and sys.stderr.target is err
        assert sum(isinstance(f, RedactingFilter) for f in handler.filters) == 1
        print(f"reading {URL}")
        logging.getLogger("actors.render").warning("set-up failed: %s", URL)  # lastResort -> sys.stderr
        ray_logger.error("Unhandled error: ValueError: cannot open %s", URL)
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        for flt in [f for f in handler.filters if isinstance(f, RedactingFilter)]:
            handler.removeFilter(flt)
    for text in (out.getvalue(), err.getvalue(), ray_stream.getvalue()):
        assert REDACTED in text, text
        for secret in ("AKIAIOSFODNN7EXAMPLE", "p@ss", "w0rd", "SECRET"):
            assert secret not in text, (secret, text)


def test_install_log_redaction_on_one_logger() -> None:
    logger = logging.getLogger("recast.test.one")
    handler = logging.StreamHandler(io.StringIO())
    logger.addHandler(handler)
    try:
        install_log_redaction(logger)
        install_log_redaction(logger)
        assert sum(isinstance(f, RedactingFilter) for f in handler.filters) == 1
    finally:
        logger.removeHandler(handler)


@pytest.mark.parametrize(
    ("url", "stripped"),
    [
        (URL, "s3://plates/sh010.mov"),
        ("s3://KEY:SEC/RET@work/segments/a/00000.mkv", "s3://work/segments/a/00000.mkv"),
        ("https://tok@en@host/x", "https://host/x"),
        ("s3://work/segments/a@2x/00000.mkv", "s3://work/segments/a@2x/00000.mkv"),
        ("/tmp/work/segments/a/00000.mkv", "/tmp/work/segments/a/00000.mkv"),
        ("http://localhost:9000/work/x", "http://localhost:9000/work/x"),
        ("s3://KEY:p@ss@work/my shot.mov", "s3://work/my shot.mov"),
        ("user@example.com", "user@example.com"),
    ],
)
def test_strip_userinfo(url: str, stripped: str) -> None:
    assert strip_userinfo(url) == stripped
