"""Peak resident memory of Recast's render actors, read from ``/proc`` while a job runs.

The actors do not report their own memory, so a poller thread in the driver reads
``VmHWM`` (peak resident set) and ``VmRSS`` of every ``ray::RenderWorker`` process
every ``interval`` seconds.  With a Ray instance started by this process
(``ray.init(address="local")``) only the workers descended from this process are
counted, so other Ray instances on the same machine are left out; when joining a
cluster every RenderWorker on this node is counted (actors on other nodes are not
visible from here).  Linux only; elsewhere the poller reports nothing.
"""

from __future__ import annotations

import contextlib
import os
import threading
from types import TracebackType
from typing import Self

ACTOR_TITLE = "ray::RenderWorker"


def _status_kb(pid: int, key: str) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def _parent(pid: int) -> int | None:
    value = _status_kb(pid, "PPid")
    return value


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _descends_from(pid: int, ancestor: int) -> bool:
    seen = 0
    current: int | None = pid
    while current and current > 1 and seen < 64:
        if current == ancestor:
            return True
        current = _parent(current)
        seen += 1
    return False


class ActorMemoryPoller:
    """Background sampler of the render actors' peak RSS (MB), keyed by pid."""

    def __init__(self, *, interval: float = 0.25, only_descendants: bool = True) -> None:
        self.interval = interval
        self.only_descendants = only_descendants
        self.peak_mb: dict[int, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-poller", daemon=True)
        self._me = os.getpid()
        self._before: set[int] = set()

    def _sample(self) -> None:
        try:
            pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
        except OSError:
            return
        for pid in pids:
            if pid in self._before or not _cmdline(pid).startswith(ACTOR_TITLE):
                continue
            if self.only_descendants and not _descends_from(pid, self._me):
                continue
            hwm = _status_kb(pid, "VmHWM")
            if hwm is not None:
                self.peak_mb[pid] = max(self.peak_mb.get(pid, 0.0), hwm / 1024.0)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()

    def __enter__(self) -> Self:
        # Actors of an earlier job may still be exiting (kills are asynchronous): not ours.
        with contextlib.suppress(OSError):
            self._before = {
                int(p)
                for p in os.listdir("/proc")
                if p.isdigit() and _cmdline(int(p)).startswith(ACTOR_TITLE)
            }
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def peaks(self) -> list[float]:
        """Peak RSS of each actor process that started during the block, in MB, largest first.

        An elastic pool may start more processes than it keeps: every one is listed.
        """
        return sorted((round(v, 1) for v in self.peak_mb.values()), reverse=True)
