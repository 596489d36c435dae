"""Progress output in a terminal and in job logs, driven by a fake clock."""

from __future__ import annotations

import io

import pytest

from cluster.report.progress import Progress, format_duration


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_log_mode_writes_rate_limited_plain_lines() -> None:
    clock, out = FakeClock(), io.StringIO()
    p = Progress({"sc010": 1000, "sc020": 500}, stream=out, every_seconds=10, clock=clock, job="j1")
    assert p.interactive is False
    clock.now += 5
    p.update("sc010", 100)
    assert out.getvalue() == ""  # under 10 s since the start: nothing yet
    clock.now += 5
    p.update("sc010", 100)
    lines = out.getvalue().splitlines()
    assert len(lines) == 1
    # 200 frames in 10 s; 1300 left at 20 fps.
    assert lines[0] == (
        "j1: 200/1,500 frames (13.3%), 20.0 fps, ETA 1m05s, elapsed 10s, "
        "shots 0/2 done; now sc010 200/1,000, retries 0"
    )
    for _ in range(9):  # 9 updates within the next 9 s: still one line
        clock.now += 1
        p.update("sc020", 10)
    assert len(out.getvalue().splitlines()) == 1
    p.retry("sc020")
    clock.now += 1
    p.update("sc020", 10)
    last = out.getvalue().splitlines()[-1]
    assert "300/1,500" in last and "retries 1" in last and "now sc010 200/1,000, sc020 100/500" in last
    assert "\r" not in out.getvalue()


def test_shot_done_and_close_lines_and_eta_excludes_finished_shots() -> None:
    clock, out = FakeClock(), io.StringIO()
    p = Progress({"a": 100, "b": 100}, stream=out, every_seconds=60, clock=clock, job="j2")
    clock.now += 10
    p.update("a", 50)
    p.shot_done("a")  # failed half way: its other 50 frames will never come
    assert p.eta_seconds() == pytest.approx(100 / 5)
    clock.now += 10
    p.update("b", 100)
    p.shot_done("b")
    p.close()
    p.close()
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("j2: shot a done, 50/100 frames; 50/200 frames (25.0%), 5.0 fps, ETA 20s")
    assert lines[1].startswith("j2: shot b done, 100/100 frames; 150/200 frames")
    assert "ETA 0s" in lines[1] and "shots 2/2 done" in lines[1]
    assert lines[2].startswith("j2: finished; 150/200 frames") and len(lines) == 3


def test_terminal_mode_redraws_one_line() -> None:
    clock, out = FakeClock(), FakeTTY()
    p = Progress({"sc010": 400}, stream=out, clock=clock, job="j3", columns=200)
    assert p.interactive is True
    clock.now += 2
    p.update("sc010", 100)
    clock.now += 0.05
    p.update("sc010", 1)  # within redraw_seconds: not drawn
    clock.now += 2
    p.update("sc010", 99)
    p.retry("sc010")
    p.close()
    text = out.getvalue()
    assert text.endswith("\n") and text.count("\n") == 1
    frames = [f.rstrip() for f in text.rstrip("\n").split("\r") if f]
    assert len(frames) == 4  # two updates, the retry, close
    assert (
        frames[0]
        == "j3 [######..................] 100/400 (25.0%) 50.0 fps ETA 6s retries 0 shots 0/1 | sc010 25%"
    )
    assert frames[1].startswith("j3 [############............] 200/400 (50.0%) 49.4 fps ETA 4s retries 0")
    assert "retries 1" in frames[2]
    # A narrow terminal keeps the numbers and drops the shot list.
    narrow = FakeTTY()
    q = Progress({"sc010": 400}, stream=narrow, clock=clock, job="j3", columns=60)
    q.retry("sc010")
    assert narrow.getvalue() == "\r" + "j3 [........................] 0/400 (0.0%) 0.0 fps ETA -- r"


def test_rate_follows_the_recent_window() -> None:
    clock = FakeClock()
    p = Progress({"s": 10_000}, stream=io.StringIO(), clock=clock, window_seconds=30)
    clock.now += 60  # a minute of set-up: the rate must not stay diluted by it
    for _ in range(10):
        clock.now += 10
        p.update("s", 100)
    assert p.fps() == pytest.approx(10.0)
    assert p.eta_seconds() == pytest.approx(9000 / 10)


def test_rejects_bad_input() -> None:
    p = Progress({"s": 10}, stream=io.StringIO())
    with pytest.raises(KeyError, match="nope"):
        p.update("nope", 1)
    with pytest.raises(ValueError, match="frames_done_delta"):
        p.update("s", -1)
    with pytest.raises(ValueError, match="negative"):
        Progress({"s": -1}, stream=io.StringIO())
    p.update("s", 25)
    assert p.frames_done == 10  # clamped at the shot's total


def test_format_duration() -> None:
    assert [format_duration(x) for x in (None, 0, 59.4, 61, 3599, 3600 * 2 + 300)] == [
        "--", "0s", "59s", "1m01s", "59m59s", "2h05m"
    ]  # fmt: skip
