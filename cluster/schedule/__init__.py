"""Running a checked job on Ray: the event loop, shot planning, the actor pool and dispatch.

:mod:`cluster.schedule.job_loop` is the driver's event loop; it plans each tracked shot on a
thread (:mod:`~cluster.schedule.planner`), hands work items (:mod:`~cluster.schedule.calls`)
to the dispatcher (:mod:`~cluster.schedule.dispatch`, its queue policy in
:mod:`~cluster.schedule.work_queue`) over the pool of render actors
(:mod:`~cluster.schedule.pool`, configured by :mod:`~cluster.schedule.actor_config`), and
tells the observer (:mod:`~cluster.schedule.observer`) what happened.  Imports Ray.

Public API: :class:`JobLoop`, :class:`JobObserver`, :class:`Dispatcher`, :class:`ActorPool`,
:func:`plan_pool`, :class:`PoolPlan`, :class:`WorkItem`, :class:`WorkQueue` and :func:`render_config`.
"""

from cluster.schedule.actor_config import render_config as render_config
from cluster.schedule.dispatch import Dispatcher as Dispatcher
from cluster.schedule.job_loop import JobLoop as JobLoop
from cluster.schedule.observer import JobObserver as JobObserver
from cluster.schedule.pool import ActorPool as ActorPool
from cluster.schedule.pool import PoolPlan as PoolPlan
from cluster.schedule.pool import plan_pool as plan_pool
from cluster.schedule.work_queue import WorkItem as WorkItem
from cluster.schedule.work_queue import WorkQueue as WorkQueue
