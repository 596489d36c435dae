"""Credential redaction for strings, nested specs and log records.

Credentials belong in the environment (instance roles, AWS_* variables), never
in specs, manifests, reports or logs.  When one is passed by mistake we replace
it with ``REDACTED`` wherever we write text: AWS key ids, values of secret-looking
keys, URL userinfo, signed-URL query parameters, bearer tokens and PEM private keys.

A secret-looking key is a word (``password``, ``aws_secret_access_key``, ``Cookie``) followed by
``:`` or ``=`` and a value, never a piece of a path: in ``/data/secret_plates/sc01.mov: not found``
or ``/etc/passwd_copy: is a folder`` the word is a file's name, and the refusal that names the file
is printed as written.  The same goes for mapping keys: ``{"/data/secret.mov": ...}`` is a path.
"""

from __future__ import annotations

import io
import logging
import re
import sys
import threading
from collections.abc import Mapping
from typing import Any, TextIO

REDACTED = "***REDACTED***"

_SECRET_KEY = re.compile(
    r"(secret|passw(or)?d|passwd|pwd|token|credential|private[_-]?key|api[_-]?key|access[_-]?key"
    r"|session[_-]?key|signature|authorization|cookie|x-amz-credential)",
    re.IGNORECASE,
)
"""Mapping keys whose values are credentials whatever they look like."""

_SECRET_KEY_WORD = (
    r"[A-Za-z0-9_.-]*(?:secret|passw(?:or)?d|passwd|pwd|token|credential|private[_-]?key|api[_-]?key"
    r"|access[_-]?key(?:[_-]?id)?|session[_-]?key|signature|authorization)[A-Za-z0-9_.-]*"
)

_AUTH_SCHEMES = r"(?:Basic|Bearer|Digest|Token|Negotiate|NTLM|AWS4-HMAC-SHA256|AWS|HOBA|Mutual)"

_URL_START = re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]*(?P<sep>://|%3A%2F%2F)", re.IGNORECASE)
"""Where a URL begins: ``s3://``, or percent-encoded in another URL's query (``next=https%3A%2F%2F...``)."""

_TOKEN_END = re.compile(r"[\s'\"<>]")
_AT = re.compile(r"@|%40", re.IGNORECASE)
_COLON = re.compile(r"%3A", re.IGNORECASE)
_PATH = re.compile(r"[/?#]")
_PATH_ENCODED = re.compile(r"[/?#]|%2F|%3F|%23", re.IGNORECASE)
_PORT = re.compile(r"[^:]*:\d*")


def _userinfo_end(body: str, *, encoded: bool = False) -> tuple[int, int]:
    """Where the userinfo of ``body`` (the text after ``scheme://``) ends: (index, length of its ``@``).

    (-1, 0) when there is none; (end of the authority, 0) for ``user:password``
    whose ``@`` is not in ``body``.  Passwords are written unescaped, with ``@``,
    ``/``, ``?``, ``#``, spaces, quotes, angle brackets or newlines in them, so
    the longest reading wins: once the text before the first ``@`` has a
    ``user:`` that is not ``host:port``, the userinfo runs to the last ``@`` of
    ``body``.  Over-redacting a path or a sentence that has an ``@``
    (``s3://KEY:SECRET@bucket/sh010@2x.mov``) is safe, leaking a password's tail is not.
    """
    token = body[: m.start()] if (m := _TOKEN_END.search(body)) else body
    authority = (_PATH_ENCODED if encoded else _PATH).split(token, maxsplit=1)[0]
    head = _COLON.sub(":", _AT.split(authority, maxsplit=1)[0])
    hostport = head.rsplit("]", 1)[-1] if head.startswith("[") else head  # [::1]:8080
    after = body[len(token) : len(token) + 1]
    port_like = _PORT.fullmatch(hostport) and (hostport.partition(":")[2] or not after.strip())
    ats = list(_AT.finditer(body))
    if ":" in hostport and not (port_like and not _AT.search(authority)):
        return (ats[-1].start(), len(ats[-1].group())) if ats else (len(authority), 0)
    limit = len(authority)
    if token == authority:  # no path yet: "s3://svc user@bucket/x", 's3://"svc"@bucket', "s3://<svc>@b"
        path = _PATH.search(body, len(token))
        limit = path.start() if path else len(body)
    inside = [a for a in ats if a.start() < limit]
    return (inside[-1].start(), len(inside[-1].group())) if inside else (-1, 0)


def _open_userinfo(text: str) -> int:
    """Where the line of the last URL in ``text`` begins when that URL has no path yet (its
    userinfo may go on in the text that follows), else -1."""
    starts = list(_URL_START.finditer(text))
    if not starts or _PATH.search(text, starts[-1].end()):
        return -1
    return text.rfind("\n", 0, starts[-1].start()) + 1


def _redact_urls(text: str) -> str:
    """``text`` with the userinfo of every URL in it replaced; each URL's text runs to the next URL."""
    starts = list(_URL_START.finditer(text))
    out: list[str] = []
    pos = 0
    for i, start in enumerate(starts):
        region_end = starts[i + 1].start() if i + 1 < len(starts) else len(text)
        body = text[start.end() : region_end]
        end, _ = _userinfo_end(body, encoded=start.group("sep") != "://")
        if end > 0:
            out += [text[pos : start.end()], REDACTED]
            pos = start.end() + end
    return "".join(out) + text[pos:]


def strip_userinfo(url: str) -> str:
    """``url`` without its userinfo: ``s3://KEY:SECRET@bucket/x`` -> ``s3://bucket/x``.

    For URLs that are recorded to be used again (manifest records): credentials
    come from the environment, so the URL works without them.  Other text is
    returned unchanged.
    """
    scheme = _URL_START.match(url)
    if scheme is None or scheme.group("sep") != "://":
        return url
    end, at = _userinfo_end(url[scheme.end() :])
    return url if at == 0 else url[: scheme.end()] + url[scheme.end() + end + at :]


CREDENTIALS_IN_URL = (
    "credentials do not belong in a URL; they come from the environment (AWS_* variables, an instance "
    "role or service account)"
)
"""What a refusal of a URL with userinfo says (the spec, a cut's media, the command-line tools)."""


def find_url_credentials(
    value: Any, loc: tuple[str | int, ...] = ()
) -> tuple[tuple[str | int, ...], str] | None:
    """(where, url) of the first URL with userinfo (``s3://KEY:SECRET@bucket``) in nested ``value``, or None."""
    if isinstance(value, str):
        return (loc, value) if strip_userinfo(value) != value else None
    items: Any = (
        value.items()
        if isinstance(value, Mapping)
        else enumerate(value)
        if isinstance(value, list | tuple)
        else ()
    )
    for key, item in items:
        found = find_url_credentials(item, (*loc, key))
        if found is not None:
            return found
    return None


_QUOTED = r"\"(?:[^\"\\\n]|\\.)*\"?|'(?:[^'\\\n]|\\.)*'?"
"""A double- or single-quoted value, to its closing quote (or the end of the line when unclosed)."""

_ALREADY = rf"(?=\S)(?![\"']?(?:{_AUTH_SCHEMES}\s+)?{re.escape(REDACTED)})"
"""Not at a value redacted already (``Basic ***REDACTED***``): redacting is idempotent."""


_PATH_TAIL = re.compile(r"[/\\][A-Za-z0-9_.~%+-]*\Z")
"""The end of a path written up to a name: ``/data/plates/`` or ``C:\\plates\\my-``."""


def _in_path(match: re.Match[str]) -> bool:
    """Whether ``match`` begins inside a path (its key is a file or folder name, not a setting)."""
    start = match.start()
    return bool(_PATH_TAIL.search(match.string, max(0, start - 256), start))


def _redact_value(match: re.Match[str]) -> str:
    if _in_path(match):
        return match.group(0)
    value = match.group("v")
    if value[:1] in ("'", '"'):
        quote = value[0]
        closed = len(value) > 1 and value.endswith(quote) and not value.endswith("\\" + quote)
        return f"{match.group('k')}{quote}{REDACTED}{quote if closed else ''}"
    return f"{match.group('k')}{REDACTED}"


_PATTERNS: tuple[tuple[re.Pattern[str], Any], ...] = (
    # PEM private keys, whole block.
    (
        re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(-----END [A-Z ]*PRIVATE KEY-----|$)", re.DOTALL),
        REDACTED,
    ),
    # Signed URL query parameters (AWS SigV2/V4, GCS, Azure SAS) and generic token parameters.
    (
        re.compile(
            r"(?P<k>[?&;](?:X-Amz-Signature|X-Amz-Credential|X-Amz-Security-Token|Signature|AWSAccessKeyId"
            r"|X-Goog-Signature|X-Goog-Credential|sig|token|access_token|id_token|refresh_token|api_key"
            r"|apikey|key|password|passwd|pwd|secret|client_secret|auth)=)[^&#\s'\"]+",
            re.IGNORECASE,
        ),
        rf"\g<k>{REDACTED}",
    ),
    # HTTP credential headers, whole value: "Authorization: Basic dXNl...", "Cookie: a=b; c=d".
    (
        re.compile(
            rf"(?P<k>\b(?:proxy-)?(?:authorization|(?:set-)?cookie)[\"']?\s*[:=]\s*(?P<q>[\"']?))"
            rf"(?P<scheme>{_AUTH_SCHEMES}\s+)?{_ALREADY}[^\r\n\"']+",
            re.IGNORECASE,
        ),
        lambda m: m.group(0) if _in_path(m) else f"{m.group('k')}{m.group('scheme') or ''}{REDACTED}",
    ),
    (re.compile(rf"(?P<k>\bBearer\s+){_ALREADY}[A-Za-z0-9._~+/-]+=*", re.IGNORECASE), rf"\g<k>{REDACTED}"),
    # key=value, key: value, "key": "value" with a secret-looking key; a quoted value is
    # redacted whole, spaces and all ("two words here").
    (
        re.compile(
            rf"(?P<k>[\"']?{_SECRET_KEY_WORD}[\"']?\s*[:=]\s*){_ALREADY}(?!(?:true|false)\b[\s,}}\"']|(?:true|false)$)"
            rf"(?P<v>{_QUOTED}|[^\s\"',}}&;]+)",
            re.IGNORECASE,
        ),
        _redact_value,
    ),
    # AWS access key ids anywhere (long-term AKIA and temporary ASIA, and other IAM id kinds).
    (re.compile(r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16}\b"), REDACTED),
)


def redact_text(text: str) -> str:
    """``text`` with every credential-looking substring replaced by ``REDACTED``."""
    text = _redact_urls(text)  # URL userinfo first: s3://KEY:SECRET@bucket, https://user:p@ss word@host
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text


_PLAIN_TYPES = frozenset({int, float, bool, type(None)})


def plain_numbers(values: list[Any] | tuple[Any, ...]) -> bool:
    """True when every item of ``values`` is an int, a float, a bool or None: nothing in it to redact
    (a QC series of thousands of frames is checked in one pass in C, not item by item in Python)."""
    return _PLAIN_TYPES.issuperset(map(type, values))


def is_secret_key(key: str) -> bool:
    """True when a mapping key names a credential (``aws_secret_access_key``, ``token``...); a path
    (``/data/secret_plates/sc01.mov``) names a file, not a credential."""
    return "/" not in key and "\\" not in key and bool(_SECRET_KEY.search(key))


def redact(value: Any) -> Any:
    """A copy of ``value`` (str, mapping, list, tuple, scalars) with credentials redacted.

    Values under secret-looking keys are replaced whole; other strings go
    through ``redact_text``.  Pydantic models are redacted through ``model_dump``.
    """
    return Redactor()(value)


class Redactor:
    """:func:`redact` that remembers: each distinct string is redacted, and each mapping key checked, once.

    For values redacted again and again (a running job's summary, copied for every report): the
    same shot names, URLs and actor labels come back in every copy.  ``redact_text`` depends on
    nothing but its text, so what it gave is what it would give again.
    """

    def __init__(self) -> None:
        self._texts: dict[str, str] = {}
        self._keys: dict[str, bool] = {}

    def text(self, text: str) -> str:
        """``redact_text(text)``."""
        out = self._texts.get(text)
        if out is None:
            out = self._texts[text] = redact_text(text)
        return out

    def is_secret_key(self, key: str) -> bool:
        """``is_secret_key(key)``."""
        secret = self._keys.get(key)
        if secret is None:
            secret = self._keys[key] = is_secret_key(key)
        return secret

    def __call__(self, value: Any) -> Any:
        """``redact(value)``."""
        if value is None or isinstance(value, bool | int | float):
            return value
        if isinstance(value, str):
            return self.text(value)
        if hasattr(value, "model_dump"):
            value = value.model_dump(mode="json")
            if isinstance(value, str):
                return self.text(value)
        if isinstance(value, Mapping):
            out: dict[Any, Any] = {}
            for key, item in value.items():
                # a flag is never a secret (provenance.content_credentials: false)
                if (
                    isinstance(key, str)
                    and self.is_secret_key(key)
                    and item not in (None, "", b"")
                    and not isinstance(item, bool)
                ):
                    out[key] = REDACTED
                else:
                    out[key] = self(item)
            return out
        if isinstance(value, list | tuple):
            if plain_numbers(value):
                return type(value)(value)
            return type(value)(self(item) for item in value)
        return value


class RedactingFilter(logging.Filter):
    """A logging filter that redacts credentials from every record's message.

    Attach it to handlers (``handler.addFilter(RedactingFilter())``) so that
    records from every logger are covered; the message is formatted once with
    its arguments, redacted, and stored without arguments.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a broken format string must not hide the record
            message = str(record.msg)
        record.msg = redact_text(message)
        record.args = None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact_text(record.exc_text)
        if record.stack_info:
            record.stack_info = redact_text(record.stack_info)
        return True


def install_log_redaction(logger: logging.Logger | None = None) -> RedactingFilter:
    """Add a RedactingFilter to every handler of ``logger``.

    By default, of the root logger and of ``ray`` (whose handlers do not propagate
    to the root: Ray's own messages, such as an unhandled task error, would pass
    unfiltered).  A handler that has one already is left as it is, so calling
    this again after Ray set up its logging is safe.
    """
    targets = [logger] if logger is not None else [logging.getLogger(), logging.getLogger("ray")]
    flt = RedactingFilter()
    for target in targets:
        for handler in target.handlers:
            if not any(isinstance(f, RedactingFilter) for f in handler.filters):
                handler.addFilter(flt)
    return flt


_STREAM_PENDING_MAX = 64 * 1024
"""A line longer than this is passed on in pieces (each redacted) instead of held back whole."""


class RedactingStream(io.TextIOBase):
    """A text stream (``sys.stdout``/``sys.stderr``) that redacts every line before passing it on.

    Text is held back to the end of its line, so a credential written in pieces
    (``print`` writes the text, then the newline; a traceback is written line by
    line) is redacted whole, and a line whose URL has no path yet is held with the
    next (a password with a newline in it); ``flush`` passes on what is held.
    """

    def __init__(self, target: TextIO) -> None:
        super().__init__()
        self.target = target
        self._pending = ""
        self._lock = threading.Lock()

    def write(self, text: str) -> int:
        with self._lock:
            self._pending += text
            if "\n" in self._pending:
                done, _, rest = self._pending.rpartition("\n")
                hold = -1 if not rest else _open_userinfo(done)
                if hold < 0:
                    self.target.write(redact_text(done + "\n"))
                    self._pending = rest
                elif hold > 0:  # from the line whose URL's userinfo may go on past the newline
                    self.target.write(redact_text(done[:hold]))
                    self._pending = self._pending[hold:]
            if len(self._pending) > _STREAM_PENDING_MAX:
                self.target.write(redact_text(self._pending))
                self._pending = ""
        return len(text)

    def flush(self) -> None:
        if getattr(self.target, "closed", False):
            return  # e.g. collected at exit after its target was closed: nothing can be passed on
        with self._lock:
            if self._pending:
                self.target.write(redact_text(self._pending))
                self._pending = ""
        self.target.flush()

    def __getattr__(self, name: str) -> Any:
        if name == "target":  # not set yet (or being unpickled): no recursion
            raise AttributeError(name)
        return getattr(self.target, name)  # buffer, name, mode, reconfigure... of the stream it wraps

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self.target.fileno()

    def isatty(self) -> bool:
        return self.target.isatty()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.target, "encoding", "utf-8")

    @property
    def errors(self) -> str | None:  # type: ignore[override]
        return getattr(self.target, "errors", None)


def redact_process_output() -> None:
    """Redact everything this process writes through Python: ``sys.stdout``, ``sys.stderr``, log handlers.

    For processes whose output is copied elsewhere unfiltered: a Ray actor's
    stdout and stderr go to the node's worker log files and, with
    ``log_to_driver``, straight to the driver's terminal, past the driver's
    logging filter.  Idempotent.  Writes that bypass Python (a C library writing
    to file descriptor 2) are not covered.
    """
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is not None and not isinstance(stream, RedactingStream):
            setattr(sys, name, RedactingStream(stream))
    install_log_redaction()
