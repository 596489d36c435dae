"""Error hierarchy shared by every layer.

Library code raises these; only ``jobs/`` turns them into exit codes and
messages.  Every error names the thing that is wrong (a URL, a field, a model
file) in its message so that a user can act on it without a traceback.
"""

from __future__ import annotations


class RecastError(Exception):
    """Base class of every error Recast raises on purpose."""


class _TwoPartError(RecastError):
    """An error built from (subject, reason); pickles with both so it crosses process
    boundaries intact (Ray re-raises an actor's exception in the driver by unpickling it)."""

    _subject = "url"  # name of the first constructor argument
    reason: str

    def __reduce__(self) -> tuple[type, tuple[str, str]]:
        return (type(self), (getattr(self, self._subject), self.reason))


class StorageError(_TwoPartError):
    """A URL could not be read, written, listed or published."""

    def __init__(self, url: str, reason: str) -> None:
        super().__init__(f"{url}: {reason}")
        self.url = url
        self.reason = reason


class InputRefused(StorageError):
    """A URL refused by its type or size before (or instead of) reading it all: a FIFO,
    a device or a folder where a file belongs, or a file larger than its limit."""


class MediaError(_TwoPartError):
    """A media file cannot be probed, decoded or encoded as asked."""

    def __init__(self, url: str, reason: str) -> None:
        super().__init__(f"{url}: {reason}")
        self.url = url
        self.reason = reason


class SpecError(_TwoPartError):
    """A job spec or config value is invalid; ``field`` is its dotted path."""

    _subject = "field"

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


class ModelPackError(_TwoPartError):
    """A model pack is missing a file, fails its checksum or breaks a contract."""

    _subject = "where"

    def __init__(self, where: str, reason: str) -> None:
        super().__init__(f"{where}: {reason}")
        self.where = where
        self.reason = reason


class FaceError(_TwoPartError):
    """A source image has no usable face, or an ambiguous one."""

    _subject = "where"

    def __init__(self, where: str, reason: str) -> None:
        super().__init__(f"{where}: {reason}")
        self.where = where
        self.reason = reason


class ChecksumError(StorageError):
    """A file's content is not what was recorded of it (its sha256 differs): it must not be used."""


class LeaseError(_TwoPartError):
    """A job's work area is held by another driver, or this driver lost it; ``work_url`` names it."""

    _subject = "work_url"

    def __init__(self, work_url: str, reason: str) -> None:
        super().__init__(f"work area {work_url}: {reason}")
        self.work_url = work_url
        self.reason = reason


class ClusterUnreachable(RecastError):
    """The Ray cluster to join (``RAY_ADDRESS``, a submitted job's cluster) refused this process or
    could not be reached; the message says what to set (:func:`jobs.cli.join_ray`)."""
