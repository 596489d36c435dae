"""Live progress of a job: a redrawn bar in a terminal, plain periodic lines in job logs.

Pure Python and clock-injectable so it can be tested with ``io.StringIO`` and a
fake clock.  The rate is measured over a sliding window (``window_seconds``)
so the ETA follows the current speed rather than including set-up time.
"""

from __future__ import annotations

import math
import shutil
import sys
import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import TextIO

BAR_WIDTH = 24
SHOTS_SHOWN = 3


def format_duration(seconds: float | None) -> str:
    """``45s``, ``3m07s``, ``2h05m``; ``--`` when unknown."""
    if seconds is None or not math.isfinite(seconds) or seconds < 0:
        return "--"
    s = round(seconds)
    if s < 60:
        return f"{s}s"
    minutes, sec = divmod(s, 60)
    if minutes < 60:
        return f"{minutes}m{sec:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


class Progress:
    """Frames done / total, fps, ETA, per shot and for the job, and retries.

    ``interactive`` defaults to ``stream.isatty()``: a terminal gets one line
    redrawn in place (at most every ``redraw_seconds``, cut to ``columns``, by
    default the terminal's width); anything else (a Ray job
    log) gets a plain line at most every ``every_seconds`` plus one per finished
    shot and one at :meth:`close`.
    """

    def __init__(
        self,
        total_frames_by_shot: Mapping[str, int],
        *,
        stream: TextIO | None = None,
        interactive: bool | None = None,
        every_seconds: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
        job: str = "job",
        window_seconds: float = 30.0,
        redraw_seconds: float = 0.2,
        columns: int | None = None,
    ) -> None:
        bad = {k: v for k, v in total_frames_by_shot.items() if v < 0}
        if bad:
            raise ValueError(f"total_frames_by_shot has negative totals: {bad}")
        if every_seconds <= 0 or window_seconds <= 0:
            raise ValueError(
                f"every_seconds={every_seconds!r} and window_seconds={window_seconds!r} must be > 0"
            )
        self.stream: TextIO = stream if stream is not None else sys.stderr
        if interactive is None:
            isatty = getattr(self.stream, "isatty", None)
            interactive = bool(isatty()) if callable(isatty) else False
        self.interactive = interactive
        self.totals = dict(total_frames_by_shot)
        self.done = dict.fromkeys(self.totals, 0)
        self.finished: set[str] = set()
        self.retries = 0
        self.job = job
        self.every_seconds = every_seconds
        self.window_seconds = window_seconds
        self.redraw_seconds = redraw_seconds
        self.clock = clock
        self.started = clock()
        self.samples: deque[tuple[float, int]] = deque([(self.started, 0)])
        self.last_emit = self.started
        self.columns = columns
        self.closed = False
        self._last_width = 0

    # ------------------------------------------------------------ events

    def update(self, shot: str, frames_done_delta: int) -> None:
        """Add ``frames_done_delta`` frames finished for ``shot``."""
        if shot not in self.totals:
            raise KeyError(f"unknown shot {shot!r} (known: {', '.join(self.totals)})")
        if frames_done_delta < 0:
            raise ValueError(f"frames_done_delta={frames_done_delta!r} for {shot!r} must be >= 0")
        self.done[shot] = min(self.totals[shot], self.done[shot] + frames_done_delta)
        now = self.clock()
        self.samples.append((now, self.frames_done))
        # Keep one sample older than the window as its baseline.
        while len(self.samples) > 2 and self.samples[1][0] <= now - self.window_seconds:
            self.samples.popleft()
        self._maybe_emit(now)

    def retry(self, shot: str) -> None:
        """Count a retried piece of work of ``shot``."""
        self.retries += 1
        self._maybe_emit(self.clock(), force=self.interactive)

    def shot_done(self, shot: str) -> None:
        """Mark ``shot`` finished (published or failed): its remaining frames leave the ETA."""
        if shot not in self.totals:
            raise KeyError(f"unknown shot {shot!r}")
        self.finished.add(shot)
        now = self.clock()
        if self.interactive:
            self._maybe_emit(now, force=True)
        else:
            self._write_line(
                f"{self.job}: shot {shot} done, {self.done[shot]:,}/{self.totals[shot]:,} frames; "
                + self.status(now)
            )

    def close(self) -> None:
        """Write the final state and end the line (idempotent)."""
        if self.closed:
            return
        self.closed = True
        now = self.clock()
        if self.interactive:
            self._redraw(now)
            self.stream.write("\n")
            self.stream.flush()
        else:
            self._write_line(f"{self.job}: finished; " + self.status(now))

    # ------------------------------------------------------------ numbers

    @property
    def frames_done(self) -> int:
        return sum(self.done.values())

    @property
    def frames_total(self) -> int:
        return sum(self.totals.values())

    def fps(self, now: float | None = None) -> float:
        """Frames per second over the recent window (0 before anything is done)."""
        now = self.clock() if now is None else now
        t0, d0 = self.samples[0]
        span = now - t0
        return (self.frames_done - d0) / span if span > 0 else 0.0

    def eta_seconds(self, now: float | None = None) -> float | None:
        """Seconds until every unfinished shot is done at the current rate; None if unknown."""
        remaining = sum(self.totals[s] - self.done[s] for s in self.totals if s not in self.finished)
        if remaining == 0:
            return 0.0
        rate = self.fps(now)
        return remaining / rate if rate > 0 else None

    def current_shots(self) -> list[str]:
        """Shots with work done that are not finished, in the order given."""
        return [s for s in self.totals if s not in self.finished and self.done[s] > 0]

    def status(self, now: float | None = None) -> str:
        """One plain line: job totals, rate, ETA, current shots, retries."""
        now = self.clock() if now is None else now
        done, total = self.frames_done, self.frames_total
        pct = 100.0 * done / total if total else 100.0
        shots = ", ".join(
            f"{s} {self.done[s]:,}/{self.totals[s]:,}" for s in self.current_shots()[:SHOTS_SHOWN]
        )
        more = len(self.current_shots()) - SHOTS_SHOWN
        if more > 0:
            shots += f" +{more} more"
        parts = [
            f"{done:,}/{total:,} frames ({pct:.1f}%)",
            f"{self.fps(now):.1f} fps",
            f"ETA {format_duration(self.eta_seconds(now))}",
            f"elapsed {format_duration(now - self.started)}",
            f"shots {len(self.finished)}/{len(self.totals)} done" + (f"; now {shots}" if shots else ""),
            f"retries {self.retries}",
        ]
        return ", ".join(parts)

    def bar(self, now: float | None = None) -> str:
        """The terminal line: bar, totals, rate, ETA, retries, then the current shots.

        Ordered so that cutting it to the terminal's width drops the shots first.
        """
        now = self.clock() if now is None else now
        done, total = self.frames_done, self.frames_total
        filled = round(BAR_WIDTH * done / total) if total else BAR_WIDTH
        pct = 100.0 * done / total if total else 100.0
        shots = " ".join(f"{s} {100 * self.done[s] // max(1, self.totals[s])}%" for s in self.current_shots())
        return (
            f"{self.job} [{'#' * filled}{'.' * (BAR_WIDTH - filled)}] {done:,}/{total:,} ({pct:.1f}%) "
            f"{self.fps(now):.1f} fps ETA {format_duration(self.eta_seconds(now))} "
            f"retries {self.retries} shots {len(self.finished)}/{len(self.totals)}"
            + (f" | {shots}" if shots else "")
        )

    # ------------------------------------------------------------ output

    def _maybe_emit(self, now: float, force: bool = False) -> None:
        if self.closed:
            return
        if self.interactive:
            if force or now - self.last_emit >= self.redraw_seconds:
                self._redraw(now)
        elif now - self.last_emit >= self.every_seconds:
            self._write_line(f"{self.job}: " + self.status(now))

    def _redraw(self, now: float) -> None:
        width = (self.columns or shutil.get_terminal_size((120, 24)).columns) - 1
        line = self.bar(now)[:width]
        # \r back to the start, overwrite, pad over a longer previous line.
        self.stream.write("\r" + line + " " * max(0, self._last_width - len(line)))
        self.stream.flush()
        self._last_width = len(line)
        self.last_emit = now

    def _write_line(self, text: str) -> None:
        self.stream.write(text + "\n")
        self.stream.flush()
        self.last_emit = self.clock()
