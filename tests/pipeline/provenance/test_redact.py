"""Credentials passed by mistake are redacted from specs, logs and reports."""

from __future__ import annotations

import io
import json
import logging

from pipeline.store.redact import REDACTED, RedactingFilter, install_log_redaction, redact, redact_text

AWS_ID = "AKIAIOSFODNN7EXAMPLE"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"

SPEC = {
    "job_id": "nightfall-7",
    "input": {"url": f"s3://{AWS_ID}:{AWS_SECRET}@studio-plates/sh010.mov"},
    "storage": {"aws_access_key_id": AWS_ID, "aws_secret_access_key": AWS_SECRET, "region": "us-east-1"},
    "notify": {"url": "https://hooks.example/x?token=abc123def&channel=renders", "api_key": "k-123456"},
    "signed": "https://b.s3.amazonaws.com/o.mp4?X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F2026&X-Amz-Signature=f00dfeed",
    "shots": [{"name": "sh010", "password": "hunter2"}],
}


def _flatten(value) -> str:
    return json.dumps(value)


def test_spec_secrets_redacted_and_rest_kept() -> None:
    out = redact(SPEC)
    text = _flatten(out)
    for secret in (AWS_ID, AWS_SECRET, "abc123def", "k-123456", "f00dfeed", "hunter2"):
        assert secret not in text, secret
    assert out["storage"]["region"] == "us-east-1"
    assert out["input"]["url"] == f"s3://{REDACTED}@studio-plates/sh010.mov"
    assert out["notify"]["url"].endswith("&channel=renders")
    assert out["shots"][0]["name"] == "sh010"
    assert SPEC["storage"]["aws_secret_access_key"] == AWS_SECRET  # input not modified


def test_text_forms() -> None:
    assert redact_text("aws_secret_access_key = abc/def+g") == f"aws_secret_access_key = {REDACTED}"
    assert AWS_ID not in redact_text(f"using key {AWS_ID} now")
    assert "eyJhbGciOi" not in redact_text("Authorization: Bearer eyJhbGciOi.payload.sig")
    pem = "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIB\n-----END EC PRIVATE KEY-----"
    assert redact_text(f"key:\n{pem}\nafter") == f"key:\n{REDACTED}\nafter"
    plain = "s3://studio-renders/nightfall/sh010@2x.mp4 sha256=ab12 consent_ref=REL-1"
    assert redact_text(plain) == plain


def test_logging_filter_redacts_records() -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger = logging.getLogger("recast.test.redact")
    logger.propagate = False
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        flt = install_log_redaction(logger)
        assert isinstance(flt, RedactingFilter)
        logger.info("job spec: %s", SPEC)
        try:
            raise ValueError(f"cannot open s3://{AWS_ID}:{AWS_SECRET}@bucket/x")
        except ValueError:
            logger.exception("failed")
    finally:
        logger.removeHandler(handler)
    text = stream.getvalue()
    assert "job spec:" in text and "sh010" in text and "Traceback" in text
    for secret in (AWS_ID, AWS_SECRET, "hunter2", "k-123456"):
        assert secret not in text, secret
