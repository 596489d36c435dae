"""The overlapped runner keeps order, overlaps its stages, bounds memory and propagates errors."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from pipeline.stages import run_stages


def test_order_and_counts_preserved() -> None:
    written: list[int] = []
    times = run_stages(range(103), lambda batch: [x * 2 for x in batch], written.append, batch_size=8)
    assert written == [x * 2 for x in range(103)]
    assert times.items == 103
    assert times.batches == 13


def test_empty_source() -> None:
    written: list[int] = []
    times = run_stages([], lambda batch: batch, written.append)
    assert written == [] and times.items == 0


def test_stages_overlap() -> None:
    """Three stages of 20 ms per batch over 10 batches: the stages' busy spans overlap (the reader works on a
    later batch while the others work on earlier ones), asserted on the spans themselves, not on a wall time a
    busy machine could stretch."""
    spans: dict[str, list[tuple[float, float]]] = {"read": [], "process": [], "write": []}

    def busy(stage: str) -> None:
        started = time.monotonic()
        time.sleep(0.02)
        spans[stage].append((started, time.monotonic()))

    def source():
        for i in range(10):
            busy("read")
            yield i

    def process(batch):
        busy("process")
        return batch

    def sink(_):
        busy("write")

    times = run_stages(source(), process, sink, batch_size=1, queue_batches=2)

    def overlapping(a: str, b: str) -> int:
        return sum(1 for s0, e0 in spans[a] for s1, e1 in spans[b] if s0 < e1 and s1 < e0)

    assert [len(spans[stage]) for stage in spans] == [10, 10, 10]
    assert overlapping("read", "process") >= 5 and overlapping("process", "write") >= 5, spans
    assert times.read_seconds >= 0.19 and times.write_seconds >= 0.19 and times.process_seconds >= 0.19


def test_memory_is_bounded() -> None:
    """The reader never runs more than the queue bounds ahead of the writer."""
    produced = 0
    consumed = 0
    max_ahead = 0
    lock = threading.Lock()

    def source():
        nonlocal produced, max_ahead
        for i in range(200):
            with lock:
                produced += 1
                max_ahead = max(max_ahead, produced - consumed)
            yield np.zeros((4, 4, 3), np.uint8) + (i % 250)

    def sink(_):
        nonlocal consumed
        time.sleep(0.001)
        with lock:
            consumed += 1

    run_stages(source(), lambda b: b, sink, batch_size=4, queue_batches=2)
    assert consumed == 200
    # reader batch + 2 queued + processing batch + 2 queued + writing batch, 4 items each.
    assert max_ahead <= 4 * 7


@pytest.mark.parametrize("where", ["source", "process", "sink"])
def test_errors_propagate_and_threads_end(where: str) -> None:
    closed = threading.Event()

    def source():
        try:
            for i in range(1000):
                if where == "source" and i == 17:
                    raise RuntimeError("boom in source")
                yield i
        finally:
            closed.set()

    def process(batch):
        if where == "process" and batch[0] >= 16:
            raise RuntimeError("boom in process")
        return batch

    def sink(x):
        if where == "sink" and x == 20:
            raise RuntimeError("boom in sink")

    before = threading.active_count()
    with pytest.raises(RuntimeError, match=f"boom in {where}"):
        run_stages(source(), process, sink, batch_size=4)
    assert closed.wait(1.0), "the source generator was not closed"
    assert threading.active_count() == before


def test_process_must_return_one_result_per_item() -> None:
    with pytest.raises(ValueError, match="3 results for a batch of 4"):
        run_stages(range(8), lambda b: b[:3], lambda _: None, batch_size=4)
