"""Every form a credential is written in is redacted whole: table-driven.

Each row is (text, the secret parts that must be gone, the parts that must stay).
"""

from __future__ import annotations

import pytest

from pipeline.store.redact import REDACTED, redact, redact_text

ROWS: list[tuple[str, tuple[str, ...], tuple[str, ...]]] = [
    # URL userinfo with '@', '/', '?' or '#' in the password: the whole userinfo goes.
    ("s3://user:p@ss@word@host/x", ("user", "p@ss", "ss@word", "word"), ("@host/x",)),
    ("https://u:pa@ss@h/", ("pa@ss", "ss@h"), ("@h/",)),
    (
        "s3://AKIAIOSFODNN7EXAMPLE:wJal/rXUtnFEMI@bucket/x.mov",
        ("AKIAIOSFODNN7EXAMPLE", "wJal", "rXUtnFEMI"),
        ("@bucket/x.mov",),
    ),
    ("s3://KEY:ab/c@d@bucket/x", ("KEY", "ab/c", "c@d"), ("@bucket/x",)),
    ("s3://KEY:a#b?c@bucket/x", ("KEY", "a#b", "b?c"), ("@bucket/x",)),
    ("https://tok@en@github.com/x", ("tok", "en@"), ("@github.com/x",)),
    ("reading s3://u:p@w@h/a.mov, then more", ("p@w",), ("@h/a.mov,", "then more")),
    # HTTP credential headers, every scheme, the whole value.
    ("Authorization: Basic dXNlcjpwYXNz", ("dXNlcjpwYXNz",), ("Authorization: Basic",)),
    ("Authorization: Bearer x.y.z", ("x.y.z",), ("Bearer",)),
    ("authorization=Token abc def", ("abc", "def"), ()),
    (
        "Authorization: AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/2026, Signature=f00dfeed",
        ("AKIAIOSFODNN7EXAMPLE", "f00dfeed", "Credential="),
        (),
    ),
    ('{"Authorization": "Basic dXNlcjpwYXNz", "shot": "sh010"}', ("dXNlcjpwYXNz",), ('"shot": "sh010"',)),
    ("{'authorization': 'Basic a2V5OnNlY3JldA=='}", ("a2V5OnNlY3JldA",), ()),
    ("Cookie: session=abc123; csrftoken=def456", ("abc123", "def456"), ()),
    ("Bearer eyJhbGciOi.payload.sig", ("eyJhbGciOi", "payload"), ()),
    # Quoted values, spaces and all.
    ('password="two words here"', ("two", "words", "here"), ("password=",)),
    ("secret_key: 'a b c'", ("'a b", "b c'"), ("secret_key:",)),
    ('{"password": "p w x", "shot": "sh010"}', ("p w x",), ('"shot": "sh010"',)),
    ("{'db_password': 'hunter two'}", ("hunter", "two"), ("db_password",)),
    ('password="unterminated and long', ("unterminated", "long"), ()),
    ('token="with \\" escaped quote"', ("with", "escaped", "quote"), ()),
    # Environment-style and unquoted values.
    (
        "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG+bPxRfiCY",
        ("wJalrXUtnFEMI", "K7MDENG"),
        ("AWS_SECRET_ACCESS_KEY=",),
    ),
    ('export AWS_SECRET_ACCESS_KEY="x y z"', ("x y z",), ()),
    ("AWS_SESSION_TOKEN=FwoGZXIvYXdzEJr//////////wEaD", ("FwoGZXIvYXdz",), ()),
    ("aws_access_key_id AKIAIOSFODNN7EXAMPLE", ("AKIAIOSFODNN7EXAMPLE",), ()),
    # Signed-URL and token query parameters.
    (
        "https://b.s3.amazonaws.com/o.mp4?X-Amz-Signature=f00dfeed&X-Amz-Credential=AKIA%2F2026&X-Amz-Date=20260101",
        ("f00dfeed", "AKIA%2F2026"),
        ("X-Amz-Date=20260101", "https://b.s3.amazonaws.com/o.mp4?"),
    ),
    (
        "https://acct.blob.core.windows.net/c/x?sv=2024&sig=Zm9vYmFy%3D&se=2026",
        ("Zm9vYmFy",),
        ("sv=2024", "se=2026"),
    ),
    ("https://packs.example/p.tar?token=SECRET123&v=2", ("SECRET123",), ("v=2",)),
    ("https://h/x?access_token=ya29.abc", ("ya29.abc",), ()),
    # A path before a key does not make the key a path.
    ('{"path":"/plates/a.mov","token":"abc123"}', ("abc123",), ('"path":"/plates/a.mov"',)),
    ("/plates/a.mov: password=hunter2", ("hunter2",), ("/plates/a.mov:",)),
]

PLAIN = [
    "s3://studio-renders/nightfall/sh010@2x.mp4 sha256=ab12 consent_ref=REL-1",
    "http://localhost:9000/bucket/sh010@2x.mov",
    "http://127.0.0.1:5000/",
    "file:///tmp/plates/a@b.exr",
    "mail jo@example.com about gs://bucket/x@v2.mov",
    "basic settings: 3 shots, 12 chunks",
    # A word of a secret's key in a path is a file's name: refusals print the path as written.
    "/data/secret_plates/sc01.mov: not found",
    "/data/plates/secret.mov: not found",
    "identities.hero.images[0]: /etc/passwd_copy: is a directory, expected a regular file",
    "/refs/plates/cookie: is a directory",
    "s3://bucket/keys/api-key: not found",
    "C:\\plates\\token: not found",
]


@pytest.mark.parametrize(("text", "secrets", "kept"), ROWS, ids=[row[0][:40] for row in ROWS])
def test_secret_redacted_whole(text: str, secrets: tuple[str, ...], kept: tuple[str, ...]) -> None:
    out = redact_text(text)
    assert REDACTED in out
    for secret in secrets:
        assert secret not in out, (secret, out)
    for part in kept:
        assert part in out, (part, out)
    assert redact_text(out) == out  # idempotent: a redacted text passes through unchanged


@pytest.mark.parametrize("text", PLAIN)
def test_plain_text_untouched(text: str) -> None:
    assert redact_text(text) == text


def test_nested_values_use_the_same_rules() -> None:
    spec = {
        "input": {"url": "s3://user:p@ss@word@plates/sh010.mov"},
        "headers": ["Authorization: Basic dXNlcjpwYXNz"],
        "notes": 'password="two words here"',
    }
    text = repr(redact(spec))
    for secret in ("p@ss", "ss@word", "dXNlcjpwYXNz", "two words"):
        assert secret not in text, secret
    assert "@plates/sh010.mov" in text


def test_a_path_as_a_mapping_key_is_not_a_secret_key() -> None:
    value = {"/data/secret_plates/sc01.mov": "published", "secret_key": "abc123"}
    assert redact(value) == {"/data/secret_plates/sc01.mov": "published", "secret_key": REDACTED}
