"""Overlapped three-stage runner: read -> process -> write, on threads with bounded queues.

A render actor spends most of its time inside model sessions.  Decoding the
next frames and encoding the previous ones must not stall those sessions, so
each chunk runs as three stages connected by small bounded queues:

    reader thread:  pulls items from ``source`` (e.g. ``decode_range``) and groups them in batches
    caller thread:  ``process(batch) -> results`` (model inference; ONNX Runtime releases the GIL)
    writer thread:  ``sink(result)`` for every result, in order (e.g. ``SegmentWriter.write``)

The queues hold at most ``queue_batches`` batches each, so memory stays flat
whatever the length of the source.  Order is preserved end to end.  The first
exception raised in any stage stops the other two and is re-raised in the
caller's thread.

Ray-free: used by the render actor, by benchmarks and by tests alike.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import cast

logger = logging.getLogger(__name__)

_POLL_SECONDS = 0.05
"""How often a blocked queue operation re-checks whether another stage failed."""


@dataclass(frozen=True)
class StageTimes:
    """Seconds each stage spent doing work (not waiting), and the wall time of the run."""

    read_seconds: float
    process_seconds: float
    write_seconds: float
    wall_seconds: float
    items: int
    batches: int

    @property
    def process_busy_share(self) -> float:
        """Share of the wall time the process stage (the models) was busy."""
        return self.process_seconds / self.wall_seconds if self.wall_seconds > 0 else 0.0


class _Stopped(Exception):
    """Internal: another stage failed; this one stops quietly."""


class _End:
    """Internal end-of-stream marker."""


_END = _End()


class _Pipe[T]:
    """A bounded queue whose blocking calls give up when the run is stopping."""

    def __init__(self, maxsize: int, stop: threading.Event) -> None:
        self._queue: queue.Queue[T | _End] = queue.Queue(maxsize=maxsize)
        self._stop = stop

    def put(self, item: T | _End) -> None:
        while True:
            if self._stop.is_set():
                raise _Stopped
            try:
                self._queue.put(item, timeout=_POLL_SECONDS)
                return
            except queue.Full:
                continue

    def get(self) -> T | _End:
        while True:
            if self._stop.is_set():
                raise _Stopped
            try:
                return self._queue.get(timeout=_POLL_SECONDS)
            except queue.Empty:
                continue


def run_stages[T, U](
    source: Iterable[T],
    process: Callable[[list[T]], Sequence[U]],
    sink: Callable[[U], None],
    *,
    batch_size: int = 8,
    queue_batches: int = 2,
) -> StageTimes:
    """Run ``sink(r)`` for every ``r`` in ``process(batch)`` over batches of ``source``, overlapped.

    ``process`` must return one result per input item, in order.  The iteration
    of ``source`` happens entirely on the reader thread and every ``sink`` call
    on the writer thread, so objects that are not thread-safe (a PyAV
    container, an encoder) are each used by one thread only.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    if queue_batches < 1:
        raise ValueError(f"queue_batches must be >= 1, got {queue_batches}")

    stop = threading.Event()
    to_process: _Pipe[list[T]] = _Pipe(queue_batches, stop)
    to_write: _Pipe[Sequence[U]] = _Pipe(queue_batches, stop)
    errors: list[BaseException] = []
    errors_lock = threading.Lock()
    seconds = {"read": 0.0, "write": 0.0}

    def fail(exc: BaseException) -> None:
        with errors_lock:
            errors.append(exc)
        stop.set()

    def read() -> None:
        try:
            iterator = iter(source)
            while True:
                batch: list[T] = []
                started = time.perf_counter()
                for item in iterator:
                    batch.append(item)
                    if len(batch) == batch_size:
                        break
                seconds["read"] += time.perf_counter() - started
                if batch:
                    to_process.put(batch)
                if len(batch) < batch_size:
                    to_process.put(_END)
                    return
        except _Stopped:
            return
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            fail(exc)
        finally:
            close = getattr(source, "close", None)
            if callable(close):
                # Release the decoder (a generator's finally) on this same thread.
                try:
                    close()
                except Exception as exc:  # noqa: BLE001 - a failing close must not mask the real error
                    logger.debug("closing the source failed: %s", exc)

    def write() -> None:
        try:
            while True:
                results = to_write.get()
                if isinstance(results, _End):
                    return
                started = time.perf_counter()
                for result in results:
                    sink(result)
                seconds["write"] += time.perf_counter() - started
        except _Stopped:
            return
        except BaseException as exc:  # noqa: BLE001
            fail(exc)

    wall_started = time.perf_counter()
    reader = threading.Thread(target=read, name="stages-read", daemon=True)
    writer = threading.Thread(target=write, name="stages-write", daemon=True)
    reader.start()
    writer.start()
    process_seconds = 0.0
    items = 0
    batches = 0
    try:
        while True:
            batch = to_process.get()
            if isinstance(batch, _End):
                to_write.put(_END)
                break
            started = time.perf_counter()
            results = process(batch)
            process_seconds += time.perf_counter() - started
            if len(results) != len(batch):
                raise ValueError(f"process returned {len(results)} results for a batch of {len(batch)}")
            items += len(batch)
            batches += 1
            to_write.put(results)
    except _Stopped:
        pass
    except BaseException as exc:  # noqa: BLE001
        fail(exc)
    writer.join()
    if errors:
        stop.set()
    reader.join()
    if errors:
        raise errors[0]
    return StageTimes(
        read_seconds=seconds["read"],
        process_seconds=process_seconds,
        write_seconds=seconds["write"],
        wall_seconds=time.perf_counter() - wall_started,
        items=items,
        batches=batches,
    )


class OrderedPool[R]:
    """Runs calls on ``threads`` threads, at most ``2 * threads`` queued, and gives the results in
    submission order; the first error is raised by :meth:`submit` or :meth:`results`.

    A sink for :func:`run_stages` whose work releases the GIL (image encoding and upload).
    """

    def __init__(self, threads: int) -> None:
        from concurrent.futures import ThreadPoolExecutor

        self._pool = ThreadPoolExecutor(max_workers=max(1, threads), thread_name_prefix="ordered")
        self._bound = threading.BoundedSemaphore(2 * max(1, threads))
        self._futures: list[Future[R]] = []

    def submit[T](self, fn: Callable[[T], R], item: T) -> None:
        for done in self._futures:
            if done.done() and done.exception() is not None:
                raise cast(BaseException, done.exception())
        self._bound.acquire()
        future = self._pool.submit(fn, item)
        future.add_done_callback(lambda _: self._bound.release())
        self._futures.append(future)

    def results(self) -> list[R]:
        return [f.result() for f in self._futures]

    def __enter__(self) -> OrderedPool[R]:
        return self

    def __exit__(self, *exc: object) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
