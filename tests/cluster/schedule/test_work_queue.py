"""The dispatcher's queue policy, without Ray: which pending item goes to which actor next."""

from __future__ import annotations

import pytest

from cluster.schedule.work_queue import WorkItem, WorkQueue


def analysis(shot: int, chunk: int, seq: int) -> WorkItem:
    return WorkItem(priority=(1, shot, chunk), seq=seq, kind="analyze", shot=f"s{shot}", chunk=chunk)


def render(shot: int, chunk: int, seq: int, prefer: str | None = None, affinity=()) -> WorkItem:
    return WorkItem(
        priority=(0, shot, chunk),
        seq=seq,
        kind="render",
        shot=f"s{shot}",
        chunk=chunk,
        prefer=prefer,
        affinity=tuple(affinity),
    )


def drain(queue: WorkQueue, load: dict[str, int], cap: int) -> list[tuple[str, int, str]]:
    """Place everything placeable now, as the dispatcher's pump does: (kind, chunk, actor) in order."""
    out = []
    while (taken := queue.take(load, cap)) is not None:
        item, label = taken
        load[label] += 1
        queue.placed(item, label)
        out.append((item.kind, item.chunk, label))
    return out


def test_a_tracked_shots_renders_beat_later_analyses_and_idle_actors_still_analyse() -> None:
    queue = WorkQueue()
    for seq, (shot, chunk) in enumerate([(1, 0), (1, 1), (2, 0), (2, 1)]):
        queue.push(analysis(shot, chunk, seq))
    # Two idle actors (cap 2): each takes one analysis; none is queued behind another call.
    load = {"a": 0, "b": 0}
    assert drain(queue, load, 2) == [("analyze", 0, "a"), ("analyze", 1, "b")]
    assert len(queue) == 2
    # Shot 0 was tracked meanwhile: its renders queue on the busy actors, ahead of shot 2's analyses.
    queue.push(render(0, 0, 10))
    queue.push(render(0, 1, 11))
    assert drain(queue, load, 2) == [("render", 0, "a"), ("render", 1, "b")]
    # Actor a finished its analysis (its render runs now): no analysis is queued behind that render.
    load["a"] -= 1
    assert drain(queue, load, 2) == []
    # An idle actor with no render to take takes the next analysis, in priority order.
    load["a"] -= 1
    assert drain(queue, load, 2) == [("analyze", 0, "a")]
    assert queue.room({"a": 1, "b": 2}, 2) == 0 and queue.room({"a": 0, "b": 1}, 2) == 1


def test_analysis_first_queues_analyses_on_busy_actors() -> None:
    """The order before: every actor's queue fills with analyses, and a render waits behind them."""
    queue = WorkQueue("analysis_first")
    for seq, (shot, chunk) in enumerate([(1, 0), (1, 1), (2, 0), (2, 1), (3, 0)]):
        queue.push(analysis(shot, chunk, seq))
    load = {"a": 0, "b": 0}
    assert drain(queue, load, 2) == [
        ("analyze", 0, "a"),
        ("analyze", 1, "b"),
        ("analyze", 0, "a"),
        ("analyze", 1, "b"),
    ]
    queue.push(render(0, 0, 10))
    load["a"] -= 1
    assert drain(queue, load, 2) == [("render", 0, "a")]  # behind a's queued analysis
    assert queue.room({"a": 1, "b": 1}, 2) == 2


def test_a_render_prefers_its_idle_analysing_actor_but_never_waits_for_it() -> None:
    queue = WorkQueue()
    # The analysing actor c is idle: it takes the render although a sorts first and is idle too.
    queue.push(render(0, 0, 0, prefer="c"))
    assert drain(queue, {"a": 0, "b": 0, "c": 0}, 2) == [("render", 0, "c")]
    # c is busy (room left, but a call running): the render goes to an idle actor at once.
    queue.push(render(0, 1, 1, prefer="c"))
    assert drain(queue, {"a": 1, "b": 0, "c": 1}, 2) == [("render", 1, "b")]
    # c is full: the render does not wait for it.
    queue.push(render(0, 2, 2, prefer="c"))
    assert drain(queue, {"a": 0, "c": 2}, 2) == [("render", 2, "a")]
    # The analysing actor is gone (released, or the analysis came from the manifest): any actor.
    queue.push(render(0, 3, 3, prefer="manifest"))
    assert drain(queue, {"a": 1, "b": 0}, 2) == [("render", 3, "b")]
    # With analysis_first the analysing actor is not preferred (the placement before).
    before = WorkQueue("analysis_first")
    before.push(render(0, 0, 0, prefer="c"))
    assert drain(before, {"a": 0, "b": 0, "c": 0}, 2) == [("render", 0, "a")]


def test_adapter_affinity_then_least_loaded_then_label() -> None:
    queue = WorkQueue()
    queue.push(render(0, 0, 0, affinity=["hero"]))
    load = {"a": 0, "b": 0}
    assert drain(queue, load, 2) == [("render", 0, "a")]  # ties: lowest label
    queue.push(render(0, 1, 1, affinity=["hero"]))
    assert drain(queue, load, 2) == [("render", 1, "a")]  # a holds hero's adapter
    queue.forget("a")
    queue.push(render(0, 2, 2, affinity=["hero"]))
    assert drain(queue, {"a": 0, "b": 1}, 2) == [("render", 2, "a")]  # least loaded once a forgot it


def test_order_is_deterministic_and_drop_forgets_a_shot() -> None:
    def run() -> list[tuple[str, int, str]]:
        queue = WorkQueue()
        for seq in range(6):
            queue.push(analysis(seq % 3, seq, seq))
            queue.push(render(seq % 2, seq, 100 + seq))
        assert queue.drop("s1") == 5  # analyses 1, 4 and renders 1, 3, 5
        return drain(queue, {"b": 0, "a": 0, "c": 0}, 2)

    placed = run()
    assert placed == run()
    # Renders of shot 0 first, spread least-loaded (labels sorted), then one analysis per idle actor.
    assert placed == [("render", 0, "a"), ("render", 2, "b"), ("render", 4, "c")]


@pytest.mark.parametrize("order", ["render_first", "analysis_first"])
def test_nothing_placed_without_room(order) -> None:
    queue = WorkQueue(order)
    queue.push(analysis(0, 0, 0))
    queue.push(render(0, 1, 1))
    assert queue.take({"a": 2}, 2) is None and queue.take({}, 2) is None
    assert len(queue) == 2
