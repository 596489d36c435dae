"""Pool sizing, and the dispatcher on real Ray actors: bounded in-flight work, priorities, retries."""

from __future__ import annotations

import math
import os
import time
from types import SimpleNamespace

import pytest
import ray

from cluster.schedule.dispatch import Dispatcher, Elasticity, Room, WorkItem
from cluster.schedule.pool import ClusterRoom, plan_pool
from pipeline.errors import MediaError, SpecError

pytestmark = pytest.mark.ray


@ray.remote(num_cpus=0.5)
class Worker:
    """A tiny real actor that records how many calls it runs at once."""

    def __init__(self, label: str, setup_seconds: float = 0.0) -> None:
        time.sleep(setup_seconds)  # stands in for loading models
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

    def ready(self, fail: bool = False) -> str:
        if fail:
            raise MediaError("pack.onnx", "set-up failed")
        return self.label


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
    # Explicit GPUs on a cluster without any, and no max_actors to wait for: a clear error.
    with pytest.raises(SpecError) as err:
        plan_pool(cpu, gpus_per_actor=1, cpus_per_actor=1, max_actors=None, work_items=1)
    assert err.value.field == "resources.gpus_per_actor" and "max_actors" in err.value.reason
    # An autoscaling cluster with no GPU node yet: max_actors actors are asked for, all pending.
    plan = plan_pool(cpu, gpus_per_actor=1, cpus_per_actor=1, max_actors=4, work_items=100)
    assert (plan.actors, plan.placeable, plan.num_gpus) == (4, 0, 1.0)
    assert plan_pool(cpu, gpus_per_actor=1, cpus_per_actor=1, max_actors=4, work_items=3).actors == 3
    # More than fits now, fewer than asked: max_actors still wins (the rest is autoscaler demand).
    plan = plan_pool(gpu, gpus_per_actor=1, cpus_per_actor=4, max_actors=6, work_items=100)
    assert (plan.actors, plan.placeable) == (6, 4)
    # Any other shortfall without max_actors: one actor, pending.
    plan = plan_pool({"CPU": 1.0}, gpus_per_actor=None, cpus_per_actor=2, max_actors=None, work_items=1)
    assert (plan.actors, plan.placeable) == (1, 0)
    # Custom resources count like GPUs and go into the actor options.
    fake = {"CPU": 4.0, "recast_gpu": 2.0}
    plan = plan_pool(
        fake, gpus_per_actor=0, cpus_per_actor=1, max_actors=None, work_items=9, custom={"recast_gpu": 1}
    )
    assert plan.actors == 2 and plan.options() == {
        "num_cpus": 1,
        "num_gpus": 0.0,
        "resources": {"recast_gpu": 1.0},
    }
    assert (
        plan_pool(
            {"CPU": 4.0},
            gpus_per_actor=0,
            cpus_per_actor=1,
            max_actors=3,
            work_items=9,
            custom={"recast_gpu": 1},
        ).placeable
        == 0
    )


# The tests below only sleep in their actors: a small CPU share keeps actors of earlier
# tests (freed asynchronously) from delaying the placement of new ones.
Light = Worker.options(num_cpus=0.01)


def _item(value: int, priority: tuple, seconds: float = 0.1, affinity: tuple[str, ...] = ()) -> WorkItem:
    return WorkItem(
        priority=priority,
        kind="work",
        shot="s",
        chunk=value,
        call=lambda actor: actor.work.remote(value, seconds),
        affinity=affinity,
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


def test_spreads_work_respects_priority_and_bounds(ray_local) -> None:
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


def test_task_errors_are_returned_not_retried(ray_local) -> None:
    dispatcher = Dispatcher([("w0", Worker.remote("w0"))], max_inflight=2)
    dispatcher.submit(_item(-1, priority=(0,)))
    dispatcher.submit(_item(5, priority=(1,)))
    outcomes = {o.item.chunk: o for o in _drain(dispatcher)}
    assert isinstance(outcomes[-1].error, MediaError) and "bad frame -1" in str(outcomes[-1].error)
    assert outcomes[-1].item.attempts == 1 and dispatcher.retries == 0
    assert outcomes[5].value[1] == 5


def test_dead_actor_is_replaced_and_work_retried(ray_local) -> None:
    created = []

    def replace(dead: str):
        label = f"{dead}-r"
        handle = Worker.remote(label)
        created.append(label)
        return label, handle

    victim = Worker.remote("w0")
    other = Worker.remote("w1")
    ray.get([victim.pid.remote(), other.pid.remote()])
    retried: list[WorkItem] = []
    dispatcher = Dispatcher(
        [("w0", victim), ("w1", other)], max_inflight=2, replace_actor=replace, on_retry=retried.append
    )
    for v in range(8):
        dispatcher.submit(_item(v, priority=(v,), seconds=0.3))
    dispatcher.pump()
    time.sleep(0.1)
    ray.kill(victim)  # dies mid-call with one call queued behind it
    outcomes = _drain(dispatcher)
    assert sorted(o.item.chunk for o in outcomes) == list(range(8))
    assert all(o.error is None for o in outcomes), [o.error for o in outcomes]
    assert created == ["w0-r"] and dispatcher.retries >= 1
    # The retry hook saw every resubmission, and each item knows the actor of every attempt.
    assert len(retried) == dispatcher.retries
    assert all(item.actors[0] == "w0" and len(item.actors) == item.attempts >= 2 for item in retried)
    assert "w0" not in dispatcher.actors


def test_drop_forgets_pending_items_of_a_failed_shot() -> None:
    dispatcher = Dispatcher([("w0", object())], max_inflight=1)
    for v in range(4):
        dispatcher.submit(WorkItem(priority=(v,), shot="a" if v % 2 else "b", chunk=v))
    assert dispatcher.drop("a") == 2
    assert dispatcher.pending == 2 and dispatcher.drop("a") == 0


def test_actor_takes_work_only_once_ready(ray_local) -> None:
    fast = Light.remote("fast")
    slow = Light.remote("slow", setup_seconds=1.0)
    ray.get(fast.pid.remote())
    dispatcher = Dispatcher(
        [("fast", fast), ("slow", slow)], max_inflight=1, starting={"slow": slow.ready.remote()}
    )
    assert dispatcher.starting == ["slow"] and list(dispatcher.actors) == ["fast"]
    for v in range(16):
        dispatcher.submit(_item(v, priority=(v,), seconds=0.25))
    outcomes = _drain(dispatcher)
    on_slow = [o for o in outcomes if o.item.actor == "slow"]
    # It joined mid-way and took work, none of it before its set-up was done.
    assert on_slow and len(on_slow) < 16, len(on_slow)
    assert all(o.item.submitted_at >= dispatcher.ready_at["slow"] for o in on_slow)
    assert dispatcher.infos["slow"] == "slow"


def test_setup_error_of_a_late_actor_ends_it_only(ray_local) -> None:
    good, bad = Light.remote("good"), Light.remote("bad")
    ray.get(good.pid.remote())
    dispatcher = Dispatcher(
        [("good", good), ("bad", bad)], max_inflight=2, starting={"bad": bad.ready.remote(fail=True)}
    )
    for v in range(4):
        dispatcher.submit(_item(v, priority=(v,), seconds=0.05))
    outcomes = _drain(dispatcher)
    assert {o.item.actor for o in outcomes} == {"good"} and all(o.error is None for o in outcomes)
    # The good actor may finish the work before the bad one's set-up has even failed (a loaded
    # machine starts actor processes slowly): wait for the failure to come in.
    deadline = time.monotonic() + 60
    while "bad" not in dispatcher.setup_errors and time.monotonic() < deadline:
        dispatcher.wait(timeout=0.5)
    assert isinstance(dispatcher.setup_errors["bad"], MediaError)
    assert "pack.onnx" in str(dispatcher.setup_errors["bad"])
    # With no actor left that could take the pending work, the set-up error itself is raised.
    only_bad = Light.remote("bad2")
    dispatcher = Dispatcher(
        [("bad2", only_bad)], max_inflight=1, starting={"bad2": only_bad.ready.remote(True)}
    )
    dispatcher.submit(_item(0, priority=(0,)))
    with pytest.raises(MediaError):
        _drain(dispatcher, timeout=20)


def test_affinity_prefers_the_actor_that_ran_the_key(ray_local) -> None:
    actors = [(f"w{i}", Light.remote(f"w{i}")) for i in range(2)]
    ray.get([handle.pid.remote() for _, handle in actors])
    dispatcher = Dispatcher(actors, max_inflight=3)
    dispatcher.submit(_item(0, priority=(0,), seconds=0.5, affinity=("hero",)))
    dispatcher.pump()
    dispatcher.submit(_item(1, priority=(1,), seconds=0.5, affinity=("villain",)))
    dispatcher.pump()
    # Least-loaded would pick w1 for both of these; the actors that hold the adapters win instead.
    dispatcher.submit(_item(2, priority=(2,), seconds=0.1, affinity=("hero",)))
    dispatcher.submit(_item(3, priority=(3,), seconds=0.1, affinity=("hero",)))
    dispatcher.submit(_item(4, priority=(4,), seconds=0.1))
    dispatcher.pump()
    outcomes = {o.item.chunk: o.item.actor for o in _drain(dispatcher)}
    assert outcomes[0] == outcomes[2] == outcomes[3] == "w0"
    assert outcomes[1] == "w1" and outcomes[4] == "w1"  # full w0 (3 in flight) falls back to least-loaded


def _dies_within(handle: object, seconds: float) -> bool:
    """True once a call on ``handle`` fails with RayActorError (the actor is dead) within ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            ray.get(handle.pid.remote(), timeout=max(0.1, deadline - time.monotonic()))
        except ray.exceptions.RayActorError:
            return True
        except ray.exceptions.GetTimeoutError:
            return False
        time.sleep(0.2)
    return False


def test_elastic_pool_grows_releases_idle_actors_and_grows_again(ray_local) -> None:
    created: list[tuple[str, object]] = []

    def start_actor():
        label = f"e{len(created)}"
        handle = Light.remote(label)
        created.append((label, handle))
        return label, handle

    dispatcher = Dispatcher(
        [],
        max_inflight=1,
        elastic=Elasticity(
            start_actor=start_actor,
            ready_call=lambda handle: handle.ready.remote(),
            max_actors=2,
            idle_release_seconds=0.3,
        ),
    )
    for v in range(6):
        dispatcher.submit(_item(v, priority=(v,), seconds=0.2))
    outcomes = _drain(dispatcher)
    assert len(outcomes) == 6 and [label for label, _ in created] == ["e0", "e1"]
    assert {o.item.actor for o in outcomes} == {"e0", "e1"}
    # The queue stays empty: every actor is released (killed) so that its node can go.
    deadline = time.monotonic() + 10
    while dispatcher.handles() and time.monotonic() < deadline:
        dispatcher.wait(timeout=0.1)
    assert dispatcher.handles() == [] and set(dispatcher.released) == {"e0", "e1"}
    # ray.kill is asynchronous (through the GCS): a call made at once may still be served.
    assert _dies_within(created[0][1], seconds=30)
    # New work asks for actors again, up to the limit.
    for v in range(10, 13):
        dispatcher.submit(_item(v, priority=(v,), seconds=0.05))
    outcomes = _drain(dispatcher)
    assert sorted(o.item.chunk for o in outcomes) == [10, 11, 12]
    assert len(created) == 4
    dispatcher.release_all()
    assert dispatcher.handles() == []


def test_an_unsized_pool_grows_with_the_room_the_cluster_has(ray_local) -> None:
    """``room``: each poll asks for the actors the cluster has room for and as many waiting as the policy
    allows as demand, never past ``max_actors``; waiting ones do not hold ready actors to one call."""
    started_in_poll: list[int] = [0]  # [0]: before the first poll (the pool's first actor)
    rooms = [Room(fits=1, may_wait=0), Room(fits=0, may_wait=5), Room(fits=2, may_wait=5)]

    def start_actor():
        label = f"g{sum(started_in_poll)}"
        started_in_poll[-1] += 1
        return label, Light.remote(label)

    def room(ready: int) -> Room:
        started_in_poll.append(0)
        return rooms[min(len(started_in_poll) - 1, len(rooms)) - 1]

    dispatcher = Dispatcher(
        [],
        max_inflight=2,
        elastic=Elasticity(
            start_actor=start_actor,
            ready_call=lambda handle: handle.ready.remote(),
            max_actors=4,
            room=room,
            poll_seconds=0.3,
        ),
    )
    for v in range(40):
        dispatcher.submit(_item(v, priority=(v,), seconds=0.05))
    outcomes = _drain(dispatcher)
    assert len(outcomes) == 40
    # With none held, one at once.  Poll 1: room for one more, none may wait.  Poll 2: no room, so two
    # (up to max_actors) wait as demand; they are placed at once on this Ray.  Later polls: at the limit.
    assert started_in_poll[:3] == [1, 1, 2] and sum(started_in_poll) == 4, started_in_poll
    assert len({o.item.actor for o in outcomes}) >= 2
    dispatcher.release_all()


def test_cluster_room_counts_free_resources_and_no_demand_without_an_autoscaler(ray_local) -> None:
    plan = plan_pool(
        ray.cluster_resources(), gpus_per_actor=0, cpus_per_actor=0.5, max_actors=None, work_items=9
    )
    free = ray.available_resources().get("CPU", 0.0)
    room = ClusterRoom(plan)(ready=3)
    assert room == Room(fits=math.floor(free / 0.5 + 1e-9), may_wait=0)  # the shared Ray has no autoscaler


def test_actors_on_a_drained_node_finish_their_calls_and_take_no_more(ray_local) -> None:
    a, b = Light.remote("a"), Light.remote("b")
    ray.get([a.pid.remote(), b.pid.remote()])
    draining: dict[str, float] = {}
    dispatcher = Dispatcher(
        [("a", a), ("b", b)],
        max_inflight=2,
        elastic=Elasticity(
            start_actor=lambda: ("spare", Light.remote("spare")),
            ready_call=lambda handle: handle.ready.remote(),
            max_actors=2,
            draining=lambda: draining,
            poll_seconds=0.0,
        ),
        # What the driver keeps of each actor's set-up probe: here only the node it was placed on.
        infos={"a": SimpleNamespace(node_id="node-a"), "b": SimpleNamespace(node_id="node-b")},
    )
    for v in range(12):
        dispatcher.submit(_item(v, priority=(v,), seconds=0.3))
    first = dispatcher.wait(timeout=0.5)
    held_by_a = [i for i in dispatcher._inflight.values() if i.actor == "a"]
    assert held_by_a  # a holds calls when its node's reclaim notice comes
    draining["node-a"] = time.time() + 60
    noticed = time.perf_counter()
    outcomes = first + _drain(dispatcher)
    assert sorted(o.item.chunk for o in outcomes) == list(range(12)) and not any(o.error for o in outcomes)
    on_a = [o for o in outcomes if o.item.actor == "a"]
    assert all(o.item.submitted_at < noticed for o in on_a), "a call went to the drained node"
    assert {o.item.chunk for o in on_a} >= {i.chunk for i in held_by_a}  # its calls finished there
    assert dispatcher.drained == {"a": "node-a"} and "a" in dispatcher.released and dispatcher.lost == 0
    dispatcher.release_all()


def test_an_unsized_pool_with_no_actor_left_asks_for_one_whatever_the_room(ray_local) -> None:
    """All actors released (the queue was empty) and new work comes while the room policy sees no room
    and allows no demand: one actor is still asked for at once, and the work is done."""
    created: list[str] = []

    def start_actor():
        created.append(f"z{len(created)}")
        return created[-1], Light.remote(created[-1])

    dispatcher = Dispatcher(
        [],
        max_inflight=1,
        elastic=Elasticity(
            start_actor=start_actor,
            ready_call=lambda handle: handle.ready.remote(),
            max_actors=3,
            idle_release_seconds=0.2,
            room=lambda ready: Room(fits=0, may_wait=0),
            poll_seconds=3600.0,  # the policy is asked once an hour: growth must not wait for it
        ),
    )
    for v in range(3):
        dispatcher.submit(_item(v, priority=(v,), seconds=0.05))
    assert len(_drain(dispatcher)) == 3 and created == ["z0"]
    deadline = time.monotonic() + 10
    while dispatcher.handles() and time.monotonic() < deadline:
        dispatcher.wait(timeout=0.1)
    assert dispatcher.handles() == []
    dispatcher.submit(_item(9, priority=(9,), seconds=0.05))
    assert [o.item.chunk for o in _drain(dispatcher)] == [9] and created == ["z0", "z1"]
    dispatcher.release_all()
