"""What every ``jobs/`` entrypoint shares: log set-up."""

from __future__ import annotations

import logging
import sys

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def configure_logging(level: str) -> None:
    """Log to stderr at ``level`` (a name such as INFO), one line per record."""
    logging.basicConfig(level=level.upper(), format=LOG_FORMAT, stream=sys.stderr)
