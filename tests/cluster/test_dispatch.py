"""Pool sizing, and the dispatcher on real Ray actors: bounded in-flight work, priorities, retries."""

from __future__ import annotations

import os
import time

import pytest
import ray

from cluster.dispatch import Dispatcher, WorkItem
from cluster.pool import plan_pool
from pipeline.errors import MediaError, SpecError
from tests.raytools import local_ray


@pytest.fixture(scope="module")
def ray_cpus2():
    with local_ray(num_cpus=2):
        yield


@ray.remote(num_cpus=0.5)
class Worker:
    """A tiny real actor that records how many calls it runs at once."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.calls: list[int] = []

    def work(self, value: int, seconds: float) -> tuple[str, int, int]:
        if value < 0:
            raise MediaError("clip.mp4", f"bad frame {value}")
        time.sleep(seconds)
        self.calls.append(value)
        return self.label, value, os.getpid()

    def pid(self) -> int:
        return os.getpid()


def test_plan_pool() -> None:
    cpu = {"CPU": 16.0}
    assert plan_pool(cpu, gpus_per_actor=None, cpus_per_actor=2, max_actors=None, work_items=100).actors == 8
    assert plan_pool(cpu, gpus_per_actor=None, cpus_per_actor=2, max_actors=3, work_items=100).actors == 3
    assert plan_pool(cpu, gpus_per_actor=None, cpus_per_actor=2, max_actors=None, work_items=2).actors == 2
    gpu = {"CPU": 32.0, "GPU": 4.0}
    plan = plan_pool(gpu, gpus_per_actor=None, cpus_per_actor=4, max_actors=None, work_items=100)
    assert (plan.actors, plan.num_gpus, plan.num_cpus) == (4, 1.0, 4)
    assert plan_pool(gpu, gpus_per_actor=0.5, cpus_per_actor=2, max_actors=None, work_items=100).actors == 8
    assert plan_pool(gpu, gpus_per_actor=0, cpus_per_actor=4, max_actors=None, work_items=100).num_gpus == 0
    with pytest.raises(SpecError) as err:
        plan_pool(cpu, gpus_per_actor=1, cpus_per_actor=1, max_actors=None, work_items=1)
    assert err.value.field == "resources.gpus_per_actor"
    with pytest.raises(SpecError):
        plan_pool({"CPU": 1.0}, gpus_per_actor=None, cpus_per_actor=2, max_actors=None, work_items=1)


def _item(value: int, priority: tuple, seconds: float = 0.1) -> WorkItem:
    return WorkItem(
        priority=priority,
        kind="work",
        shot="s",
        chunk=value,
        call=lambda actor: actor.work.remote(value, seconds),
    )


def _drain(dispatcher: Dispatcher, timeout: float = 60.0):
    outcomes = []
    deadline = time.monotonic() + timeout
    while not dispatcher.idle and time.monotonic() < deadline:
        outcomes.extend(dispatcher.wait(timeout=0.5))
        # Calls of a dead actor may still be counted in flight until they fail; live actors stay bounded.
        assert all(n <= dispatcher.max_inflight for n in dispatcher.load().values())
    assert dispatcher.idle
    return outcomes


def test_spreads_work_respects_priority_and_bounds(ray_cpus2) -> None:
    actors = [(f"w{i}", Worker.remote(f"w{i}")) for i in range(3)]
    ray.get([handle.pid.remote() for _, handle in actors])  # warm, as the driver does
    dispatcher = Dispatcher(actors, max_inflight=2)
    for v in range(12):
        dispatcher.submit(_item(v, priority=(1, v)))
    for v in range(100, 103):
        dispatcher.submit(_item(v, priority=(0, v)))
    outcomes = _drain(dispatcher)
    assert sorted(o.item.chunk for o in outcomes) == [*range(12), 100, 101, 102]
    assert all(o.error is None for o in outcomes)
    per_actor = {label: sum(1 for o in outcomes if o.value[0] == label) for label, _ in actors}
    assert all(n >= 3 for n in per_actor.values()), per_actor
    # Priority 0 work went out in the first wave, before any of the priority 1 items beyond it.
    first_wave = sorted(outcomes, key=lambda o: o.item.seq)
    dispatch_order = sorted(outcomes, key=lambda o: o.item.submitted_at)
    assert [o.item.chunk for o in dispatch_order[:3]] == [100, 101, 102]
    assert len(first_wave) == 15


def test_task_errors_are_returned_not_retried(ray_cpus2) -> None:
    dispatcher = Dispatcher([("w0", Worker.remote("w0"))], max_inflight=2)
    dispatcher.submit(_item(-1, priority=(0,)))
    dispatcher.submit(_item(5, priority=(1,)))
    outcomes = {o.item.chunk: o for o in _drain(dispatcher)}
    assert isinstance(outcomes[-1].error, MediaError) and "bad frame -1" in str(outcomes[-1].error)
    assert outcomes[-1].item.attempts == 1 and dispatcher.retries == 0
    assert outcomes[5].value[1] == 5


def test_dead_actor_is_replaced_and_work_retried(ray_cpus2) -> None:
    created = []

    def replace(dead: str):
        label = f"{dead}-r"
        handle = Worker.remote(label)
        created.append(label)
        return label, handle

    victim = Worker.remote("w0")
    other = Worker.remote("w1")
    ray.get([victim.pid.remote(), other.pid.remote()])
    dispatcher = Dispatcher([("w0", victim), ("w1", other)], max_inflight=2, replace_actor=replace)
    for v in range(8):
        dispatcher.submit(_item(v, priority=(v,), seconds=0.3))
    dispatcher.pump()
    time.sleep(0.1)
    ray.kill(victim)  # dies mid-call with one call queued behind it
    outcomes = _drain(dispatcher)
    assert sorted(o.item.chunk for o in outcomes) == list(range(8))
    assert all(o.error is None for o in outcomes), [o.error for o in outcomes]
    assert created == ["w0-r"] and dispatcher.retries >= 1
    assert "w0" not in dispatcher.actors


def test_drop_forgets_pending_items_of_a_failed_shot() -> None:
    dispatcher = Dispatcher([("w0", object())], max_inflight=1)
    for v in range(4):
        dispatcher.submit(WorkItem(priority=(v,), shot="a" if v % 2 else "b", chunk=v))
    assert dispatcher.drop("a") == 2
    assert dispatcher.pending == 2 and dispatcher.drop("a") == 0
