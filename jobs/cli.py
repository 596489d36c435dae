"""What every ``jobs/`` entrypoint shares: log set-up, joining Ray, stops."""

from __future__ import annotations

import logging
import os
import sys
from types import ModuleType
from typing import Any

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def configure_logging(level: str) -> None:
    """Log to stderr at ``level`` (a name such as INFO), one line per record."""
    logging.basicConfig(level=level.upper(), format=LOG_FORMAT, stream=sys.stderr)


def url_credentials_refused(prog: str, *urls: str | None) -> bool:
    """Print a refusal (the URL redacted) and return True when a URL has userinfo (``s3://user:pw@b/x``).

    Refused before any library sees it: their errors echo pieces of the URL (an "invalid
    bucket name" quoting ``user:pw@bucket``) that no pattern can recognise.
    """
    from pipeline.store.redact import CREDENTIALS_IN_URL, find_url_credentials, redact_text

    found = find_url_credentials([url for url in urls if url])
    if found is None:
        return False
    print(
        f"{prog}: {redact_text(found[1])}: {CREDENTIALS_IN_URL}",
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


AUTH_HELP = (
    "to join it, set RAY_AUTH_MODE=token and give the cluster's token in RAY_AUTH_TOKEN, in the file "
    "RAY_AUTH_TOKEN_PATH names, or in ~/.ray/auth_token (`ray get-auth-token` on the head prints it)"
)
"""What a process must set to join a cluster with Ray's token authentication."""


def join_ray(ray: ModuleType, **options: Any) -> None:
    """``ray.init(**options)``: join ``options['address']`` or ``RAY_ADDRESS`` when set, else start a
    local Ray.  A cluster that refuses this process (Ray's token authentication: no token, another
    token, or ``RAY_AUTH_MODE`` unset, when Ray sends none) or cannot be reached raises
    :class:`~pipeline.errors.ClusterUnreachable` naming the address, what this process has (never the
    token itself) and what to set, instead of Ray's "a previous Ray instance that has since crashed"."""
    from pipeline.errors import ClusterUnreachable

    try:
        ray.init(**options)
    except (ConnectionError, ray.exceptions.AuthenticationError) as exc:
        address = options.get("address") or os.environ.get("RAY_ADDRESS") or "the default address"
        reason = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else type(exc).__name__
        raise ClusterUnreachable(
            f"cannot join the Ray cluster at {address} ({type(exc).__name__}: {reason}). This process has "
            f"{auth_setting()}. A cluster with token authentication refuses a process that sends no token or "
            f"another one; {AUTH_HELP}. A cluster without it must be running at that address."
        ) from None


def auth_setting() -> str:
    """This process's Ray authentication settings, in words (where a token would come from, never it)."""
    mode = os.environ.get("RAY_AUTH_MODE")
    said = f"RAY_AUTH_MODE={mode}" if mode else "RAY_AUTH_MODE unset (Ray then sends no token)"
    if os.environ.get("RAY_AUTH_TOKEN"):
        where = "a token in RAY_AUTH_TOKEN"
    elif os.environ.get("RAY_AUTH_TOKEN_PATH"):
        path = os.environ["RAY_AUTH_TOKEN_PATH"]
        where = f"RAY_AUTH_TOKEN_PATH={path}" + ("" if os.path.isfile(path) else " (no such file)")
    elif os.path.isfile(os.path.expanduser("~/.ray/auth_token")):
        where = "a token in ~/.ray/auth_token"
    else:
        where = "no token (no RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token)"
    return f"{said} and {where}"
