"""A render actor's own output is redacted before Ray copies it anywhere."""

from __future__ import annotations

import ray

from pipeline.store.redact import redact_process_output


def redact_actor_output() -> None:
    """In a Ray actor's process: redact its stdout, stderr and log handlers (idempotent); elsewhere nothing.

    Ray keeps an actor's stdout and stderr in the node's worker log files and,
    with ``log_to_driver``, prints them on the driver's terminal as they are,
    past the driver's logging filter: a pack URL with a token in a set-up error
    would be shown in clear.  In-process use (benchmarks, the driver) is left
    alone: that process redacts its own output.
    """
    if ray.is_initialized() and ray.get_runtime_context().get_actor_id() is not None:
        redact_process_output()
