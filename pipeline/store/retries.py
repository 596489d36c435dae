"""How object-store requests are retried, bounded and counted: the job spec's ``storage:`` block.

Retries are the store client's own: botocore's retry mode (``standard`` or ``adaptive``: exponential
backoff with jitter, at most 20 s between tries, throttling and 5xx answers, dropped connections and
timeouts) with ``retries + 1`` attempts per request, and s3fs's re-read of an object whose body failed
mid-transfer (a reset or a stalled read), ``retries + 1`` tries.  Nothing here loops.

What this module adds is a bound and a count, both through botocore's event system on the one
session every S3 client of the process is made from (:class:`StoreClient`):

- ``total_seconds``: an operation of :mod:`pipeline.store.storage` (a read, an upload, a listing) whose
  requests keep failing, with no success between, for longer than this gives up: the next request is
  refused with a :class:`~pipeline.errors.StorageError` naming the object and the last error.  The
  longest such an operation runs is ``total_seconds`` plus one backoff (20 s at most) and one attempt
  (``connect_timeout_s + read_timeout_s``).
- retries: each request botocore sends again (its attempt 2, 3...) and each body s3fs reads again are
  counted on the process's :class:`StoreClient`; the job summary's ``storage_retries`` adds up the
  driver's and the actors'.

Local paths are not touched by any of it.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

from aiobotocore.session import AioSession
from pydantic import Field, model_validator

from pipeline.configbase import Frozen
from pipeline.errors import StorageError

RetryMode = Literal["standard", "adaptive"]

MAX_BACKOFF_SECONDS = 20.0
"""botocore's longest wait between two attempts in the standard and adaptive modes."""


class StorageConfig(Frozen):
    """Object-store retries and time limits (the spec's ``storage:``; the driver's and every actor's).

    Local paths ignore it.  Endpoints and credentials still come from the environment, never from here."""

    retries: int = Field(default=8, ge=0, le=20)
    """Times a failed request is sent again (botocore: ``retries + 1`` attempts), and times s3fs reads an
    object again when its body fails mid-transfer."""
    mode: RetryMode = "standard"
    """botocore's retry mode: ``standard`` (backoff with jitter) or ``adaptive`` (also slows the client
    down while the store answers SlowDown)."""
    connect_timeout_s: float = Field(default=5.0, gt=0.0, le=300.0)
    """Seconds to open a connection before the attempt fails (and is retried)."""
    read_timeout_s: float = Field(default=20.0, gt=0.0, le=600.0)
    """Seconds a read may wait for data before the attempt fails (and is retried)."""
    total_seconds: float = Field(default=600.0, gt=0.0, le=86400.0)
    """An operation whose requests have kept failing this long, with no success between, gives up with an
    error naming the object and the last error."""

    @model_validator(mode="after")
    def _one_attempt_fits(self) -> StorageConfig:
        if self.total_seconds < self.connect_timeout_s + self.read_timeout_s:
            raise ValueError(
                f"total_seconds ({self.total_seconds:g}) must leave room for one attempt: at least "
                f"connect_timeout_s + read_timeout_s ({self.connect_timeout_s + self.read_timeout_s:g})"
            )
        return self

    @property
    def longest_failure_seconds(self) -> float:
        """The longest an operation that keeps failing runs before its error: ``total_seconds``, then at most
        one backoff and one attempt."""
        return self.total_seconds + MAX_BACKOFF_SECONDS + self.connect_timeout_s + self.read_timeout_s

    @property
    def body_tries(self) -> int:
        """s3fs's tries of a read whose body fails mid-transfer (its ``retries`` attribute)."""
        return self.retries + 1

    def s3_options(self) -> dict[str, Any]:
        """s3fs's constructor options: botocore's retry mode, attempts and timeouts (s3fs's own tries are
        an attribute of the filesystem, :attr:`body_tries`)."""
        return {
            "config_kwargs": {
                "retries": {"mode": self.mode, "total_max_attempts": self.retries + 1},
                "connect_timeout": self.connect_timeout_s,
                "read_timeout": self.read_timeout_s,
            },
        }


@dataclass
class _Operation:
    """One call of :mod:`pipeline.store.storage` on a remote URL: since when its requests fail, and how."""

    url: str
    failing_since: float | None = None
    last_error: str | None = None
    failures: int = 0
    unanswered: bool = False
    """The last request failed and none was sent since: the next one is a retry (botocore's or s3fs's)."""


_RETRYABLE_STATUS = frozenset({429, 500, 502, 503, 504})


def _failure(response: Any, caught_exception: BaseException | None) -> str | None:
    """What went wrong with one attempt (None: it got an answer, even a 404)."""
    if caught_exception is not None:
        return f"{type(caught_exception).__name__}: {caught_exception}"
    if not response:
        return None
    http, parsed = response
    status = getattr(http, "status_code", 0)
    if status not in _RETRYABLE_STATUS:
        return None
    error = parsed.get("Error", {}) if isinstance(parsed, dict) else {}
    code = error.get("Code")
    message = error.get("Message")
    code = "" if code in (None, str(status)) else f" {code}"
    return f"HTTP {status}{code}" + (f": {message}" if message else "")


class _WatchedBody:
    """A GetObject body that reports a read failing mid-transfer (s3fs then reads the object again)."""

    def __init__(self, body: Any, client: StoreClient) -> None:
        self._body = body
        self._client = client

    async def read(self, *args: Any) -> bytes:
        try:
            return bytes(await self._body.read(*args))
        except Exception as exc:
            self._client.body_failed(exc)
            raise

    def __getattr__(self, name: str) -> Any:
        return getattr(self._body, name)


class _Session(AioSession):
    """The botocore session every S3 client of the process is made from; it knows its :class:`StoreClient`."""

    def __init__(self, client: StoreClient) -> None:
        super().__init__()
        self.recast_client = client


class StoreClient:
    """The object-store settings of one process, the botocore session its S3 clients are made from, and
    the retries they made.

    One per process (:func:`pipeline.store.storage.configure` makes it and hands it to fsspec as the
    session of every ``s3://`` filesystem); its handlers run on fsspec's I/O thread, in the context of
    the operation that sent the request, so ``total_seconds`` applies per operation."""

    def __init__(self, settings: StorageConfig) -> None:
        self.settings = settings
        self._lock = threading.Lock()
        self._retries = 0
        self._operation: contextvars.ContextVar[_Operation | None] = contextvars.ContextVar(
            f"recast-store-operation-{id(self)}", default=None
        )
        self.session = _Session(self)
        self.session.register("request-created.s3", self._on_request)
        self.session.register("needs-retry.s3", self._on_attempt)
        self.session.register("after-call.s3.GetObject", self._on_get)

    @property
    def retries(self) -> int:
        """Requests sent again and bodies read again since this client was made."""
        with self._lock:
            return self._retries

    def _count(self) -> None:
        with self._lock:
            self._retries += 1

    def s3_options(self) -> dict[str, Any]:
        """What every ``s3://`` filesystem of the process is made with (fsspec's ``conf["s3"]``)."""
        return {**self.settings.s3_options(), "session": self.session}

    @contextlib.contextmanager
    def operation(self, url: str) -> Iterator[None]:
        """Requests sent inside the block belong to one operation on ``url``: ``total_seconds`` bounds how
        long they may keep failing.  An operation already open (a read inside a fetch) is kept."""
        if self._operation.get() is not None:
            yield
            return
        token = self._operation.set(_Operation(url))
        try:
            yield
        finally:
            self._operation.reset(token)

    def _failed(self, error: str) -> None:
        op = self._operation.get()
        if op is None:
            return
        op.failures += 1
        op.last_error = error
        op.unanswered = True
        if op.failing_since is None:
            op.failing_since = time.monotonic()

    def body_failed(self, exc: BaseException) -> None:
        """A GetObject body failed mid-transfer: s3fs reads it again (counted then; at once outside an
        operation, where nothing sees the next request as a retry)."""
        if self._operation.get() is None:
            self._count()
        self._failed(f"{type(exc).__name__} reading the body: {exc}")

    # -- botocore event handlers (fsspec's I/O thread, in the sending operation's context)
    def _on_request(self, request: Any, **_: Any) -> None:
        attempt = int(request.context.get("retries", {}).get("attempt", 1))
        op = self._operation.get()
        if op is not None and op.failing_since is not None:
            failing = time.monotonic() - op.failing_since
            if failing > self.settings.total_seconds:
                raise StorageError(
                    op.url,
                    f"gave up after {op.failures} failed attempt(s) in {failing:.0f} s "
                    f"(storage.total_seconds: {self.settings.total_seconds:g}); last error: {op.last_error}",
                )
        if attempt > 1 or (op is not None and op.unanswered):
            self._count()  # botocore's attempt 2, 3...; or s3fs sending again what failed
        if op is not None:
            op.unanswered = False

    def _on_attempt(
        self, response: Any = None, caught_exception: BaseException | None = None, **_: Any
    ) -> None:
        if isinstance(caught_exception, StorageError):
            return
        error = _failure(response, caught_exception)
        if error is not None:
            self._failed(error)
            return
        op = self._operation.get()
        if op is not None:
            op.failing_since = None  # an answer: the operation is making progress again

    def _on_get(self, parsed: Any = None, **_: Any) -> None:
        if isinstance(parsed, dict) and "Body" in parsed:
            parsed["Body"] = _WatchedBody(parsed["Body"], self)

    def last_error(self) -> str | None:
        """The last failed attempt of the operation open in this context (None: none failed)."""
        op = self._operation.get()
        return None if op is None else op.last_error


@dataclass
class RetryTally:
    """A process's object-store retries handed on in parts (an actor's, with each of its answers)."""

    client: StoreClient
    taken: int = 0

    def take(self) -> int:
        """The retries made since the previous take (all of them, the first time)."""
        total = self.client.retries
        since, self.taken = total - self.taken, total
        return since
