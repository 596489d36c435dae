"""What every ``jobs/`` entrypoint shares: log set-up."""

from __future__ import annotations

import logging
import sys

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def configure_logging(level: str) -> None:
    """Log to stderr at ``level`` (a name such as INFO), one line per record."""
    logging.basicConfig(level=level.upper(), format=LOG_FORMAT, stream=sys.stderr)


def url_credentials_refused(prog: str, *urls: str | None) -> bool:
    """Print a refusal (the URL redacted) and return True when a URL has userinfo (``s3://user:pw@b/x``).

    Refused before any library sees it: their errors echo pieces of the URL (an "invalid
    bucket name" quoting ``user:pw@bucket``) that no pattern can recognise.
    """
    from pipeline.store.redact import find_url_credentials, redact_text

    found = find_url_credentials([url for url in urls if url])
    if found is None:
        return False
    print(
        f"{prog}: {redact_text(found[1])}: credentials do not belong in a URL; they come from the "
        "environment (AWS_* variables, an instance role or service account)",
        file=sys.stderr,
    )
    return True


def stopped_by(exc: BaseException) -> SystemExit | None:
    """The SystemExit a stop signal raised, when ``exc`` was caused by one.

    Ray's SIGTERM handler (``ray job stop``) calls ``sys.exit``; when the signal lands while a
    module is being imported, the import fails with ``ImportError: initialization failed`` caused
    by that SystemExit, and the job would report a failure (exit 1) instead of a stop.
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, SystemExit):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None
