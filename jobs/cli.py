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
