"""Render every shot of a job spec on Ray.

Locally (starts a Ray instance, or joins ``RAY_ADDRESS`` when set)::

    python -m jobs.render spec.yaml

On a cluster (from the repository root; S3 settings travel in the runtime env)::

    ray job submit --address http://HEAD:8265 --working-dir . \\
        --runtime-env-json '{"env_vars": {"AWS_ENDPOINT_URL": "...", "AWS_DEFAULT_REGION": "us-east-1"}}' \\
        -- python -m jobs.render spec.yaml

Resubmitting the same spec resumes: the job's manifest (``<work area>/manifest``)
records every committed chunk, and only unfinished work is done again
(``--resume`` insists on a manifest; ``--fresh`` ignores it).

``--fixes FILE`` (again for more shots) adds a shot's fixes, as the report's "Frames to
review" downloads them (:mod:`cluster.spec.fixes_file`), to the spec before it is checked.
The spec and ``--fixes`` files are inputs of the job: nothing it writes (nor ``--summary-json``)
may replace them, whatever ``output.if_exists`` says (:class:`cluster.checks.destinations.SpecFiles`).

Everything that can be checked without Ray (spec, sources, model pack,
adapters, identity pictures, outputs, work area) is checked before Ray starts.

One driver per work area: a resubmission while the job's driver is still
alive exits 2 naming it (``ray job stop <id>``, or when its lease expires); a
driver that died stops refreshing its lease and the next one takes it over
after ``lease.expiry_seconds``, or at once when it runs on the dead driver's
host and sees its process gone.  ``--force-takeover`` takes it at once: only for
an operator who knows the old driver is gone (a live one stops with exit 1).

A stop (SIGTERM: ``ray job stop``) leaves through the finally blocks, so the lease is
given back; one still not out after ``--stop-deadline`` seconds (45) leaves at once.

Exit status: 0 when every shot's output is published (or skipped by
``output.if_exists: skip``); 2 for a bad spec or input (the message names the
field or file, or the identity, picture or URL that the studio policy refuses:
``RECAST_POLICY_URL`` on a cluster, else ``provenance.policy_url``), or a work
area held by another driver; 1 when rendering failed (the summary says which
shots and why) or this driver's lease was taken over.  Credentials
passed by mistake are redacted from the logs, the summary and error messages.
The summary is printed and written to ``<work area>/summary.json``.
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import FrameType, ModuleType
from typing import NoReturn

from jobs.cli import configure_logging, join_ray, stopped_by

EXIT_OK, EXIT_RENDER_FAILED, EXIT_BAD_INPUT = 0, 1, 2


def main(argv: Sequence[str] | None = None, *, stops: Stops | None = None) -> int:
    """The job's exit status (see the module's docstring).  ``stops``: the stop handler of a driver
    run as a program, installed again once Ray has started (``ray.init`` installs its own)."""
    parser = argparse.ArgumentParser(prog="python -m jobs.render", description=__doc__.split("\n\n")[0])
    parser.add_argument("spec", help="job spec YAML (local path or URL)")
    parser.add_argument("--summary-json", help="also write the summary JSON to this local path")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument(
        "--resume", action="store_true", help="resume an earlier run of this job (its manifest must exist)"
    )
    mode.add_argument("--fresh", action="store_true", help="ignore the manifest of earlier runs")
    parser.add_argument(
        "--force-takeover",
        action="store_true",
        help="take the work area's lease even if another driver holds it (only when that driver is gone)",
    )
    parser.add_argument(
        "--fixes",
        action="append",
        default=[],
        metavar="FILE",
        help="a shot's fixes, as the report's notes download them ({shot: NAME, fixes: [...]}), "
        "added to that shot's fixes: before the spec is checked (may be given again)",
    )
    parser.add_argument(
        "--stop-deadline",
        type=float,
        default=STOP_DEADLINE_SECONDS,
        metavar="SECONDS",
        help="after a stop signal, how long the driver may take to finish what it must (merges in flight, "
        "the summary) before it gives the lease back and leaves at once (default %(default)s)",
    )
    parser.add_argument("--log-level", default="INFO")
    args = parser.parse_args(argv)
    if not args.stop_deadline > 0:
        parser.error(f"--stop-deadline {args.stop_deadline}: must be a number of seconds above 0")
    if stops is not None:
        stops.deadline_seconds = args.stop_deadline
    configure_logging(args.log_level)
    if args.summary_json and os.path.isdir(args.summary_json):  # found now, not after the render
        print(f"recast: --summary-json {args.summary_json} is a directory, not a file", file=sys.stderr)
        return EXIT_BAD_INPUT
    from pipeline.store.redact import install_log_redaction, redact, redact_process_output, redact_text

    # Credentials passed by mistake (signed URLs, keys in a spec) never reach the logs, nor the
    # terminal: Ray prints what the actors write on this process's stdout/stderr as it is.
    redact_process_output()

    from cluster.checks.destinations import SpecFiles
    from cluster.driver import JobRunner
    from cluster.lease.acquire import LeaseLost
    from cluster.spec.fixes_file import load_spec_with_fixes
    from pipeline.errors import RecastError, SpecError
    from pipeline.provenance.policy import PolicyError

    try:
        spec, merged = load_spec_with_fixes(args.spec, args.fixes)
    except RecastError as exc:
        print(f"recast: bad job spec: {redact_text(str(exc))}", file=sys.stderr)
        return EXIT_BAD_INPUT

    # The summary's file is a destination like the outputs: it never replaces what the job reads.
    read_from = SpecFiles(spec=args.spec, fixes=tuple(args.fixes), summary_json=args.summary_json)
    runner = JobRunner(
        spec,
        resume=True if args.resume else False if args.fresh else None,
        force_takeover=args.force_takeover,
        read_from=read_from,  # no destination may replace them
    )
    if stops is not None:
        stops.release = runner.release  # what the stop's deadline gives back before it leaves

    def refused(exc: RecastError) -> int:
        # A policy refusal (before Ray, or the faces checked on a warm actor) reads as one.
        if isinstance(exc, SpecError):
            exc = merged.rename(exc)  # a --fixes file's fix named by its file and shot
        what = "refused by the studio policy" if isinstance(exc, PolicyError) else "not started"
        print(f"recast: job {spec.job_id} {what}: {redact_text(str(exc))}", file=sys.stderr)
        return EXIT_BAD_INPUT

    try:
        runner.prepare()  # no Ray yet: a bad input fails in seconds
    except RecastError as exc:
        return refused(exc)

    try:
        import ray  # in the try: a stop that lands while Ray is imported still gives the lease back

        if not ray.is_initialized():
            _start_ray(ray, runner.release)
            if stops is not None:
                stops.install()
        install_log_redaction()  # Ray's own logger ("ray"), set up by now, does not propagate to the root
        summary = runner.run()
    except LeaseLost as exc:
        print(f"recast: job {spec.job_id} stopped: {redact_text(str(exc))}", file=sys.stderr)
        return EXIT_RENDER_FAILED
    except RecastError as exc:
        return refused(exc)
    except Exception as exc:
        stop = stopped_by(exc)
        if stop is not None:
            raise stop from None  # a stop that arrived inside an import or a library: still a stop
        logging.getLogger(__name__).exception("job %s failed", spec.job_id)
        print(
            f"recast: job {spec.job_id} failed: {type(exc).__name__}: {redact_text(str(exc))}",
            file=sys.stderr,
        )
        return EXIT_RENDER_FAILED
    finally:
        runner.release()  # also when Ray could not start: the next driver need not wait for its expiry

    print(redact_text(summary.table()))
    data = redact(summary.to_dict())
    print("SUMMARY_JSON " + json.dumps(data, default=str))
    if args.summary_json:
        os.makedirs(os.path.dirname(os.path.abspath(args.summary_json)), exist_ok=True)
        with open(args.summary_json, "w") as fh:
            json.dump(data, fh, indent=2, default=str)
    if not summary.ok:
        failed = [f"{s.name}: {redact_text(str(s.error))}" for s in summary.shots if s.status == "failed"]
        failed += [f"job: {redact_text(f)}" for f in summary.failures]
        print("recast: failed shots:\n  " + "\n  ".join(failed), file=sys.stderr)
        return EXIT_RENDER_FAILED
    return EXIT_OK


def _start_ray(ray: ModuleType, release: Callable[[], None]) -> None:
    """Join ``RAY_ADDRESS`` (or the cluster of a submitted job) when set, else start a local instance.

    A stop (``ray job stop``: SIGTERM, whose handler Ray installs first thing in ``ray.init``) that
    lands while Ray connects leaves it half built (``ray.is_initialized()`` still False, so
    :func:`_exit_disconnected` would not shut it down).  A driver stopped there was seen once to
    crash (SIGSEGV) and once to hang; neither was reproduced, so this path does not rely on the
    interpreter's teardown at all: the lease is given back (``release``), Ray is shut down within
    :data:`STOP_SHUTDOWN_SECONDS`, and the process leaves at once with the stop's code.

    Once Ray's core worker is up, a SIGTERM first reaches its native failure-signal handler (abseil's),
    which logs the stack, sets an alarm that aborts the process 3 s later (SIGABRT: "crashed"), and
    only then hands the signal to Python.  That alarm is cancelled here before the shutdown, which may
    take longer than 3 s on a busy machine.

    A cluster that refuses the driver (Ray's token authentication) is a ClusterUnreachable saying what
    to set (:func:`jobs.cli.join_ray`): exit 2, the lease given back.
    """
    try:
        join_ray(ray, log_to_driver=True, logging_level=logging.WARNING)
    except BaseException as exc:
        stop = exc if isinstance(exc, SystemExit) else stopped_by(exc)
        if stop is None:
            raise
        signal.alarm(0)  # abseil's abort timer (see above); nothing else of the driver sets one
        release()
        _leave_now(ray, stop.code)


STOP_SHUTDOWN_SECONDS = 10.0
"""How long a driver stopped while Ray was starting waits for ``ray.shutdown()`` before it leaves."""


def _leave_now(ray: ModuleType, code: int | str | None) -> NoReturn:
    """Shut Ray down (bounded in time, on a daemon thread), flush, and end the process without the
    interpreter's teardown of Ray's half-started native threads."""
    _for_at_most(STOP_SHUTDOWN_SECONDS, lambda: _quiet_shutdown(ray), name="ray-shutdown")
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code if isinstance(code, int) else EXIT_RENDER_FAILED)


def _for_at_most(seconds: float, fn: Callable[[], None], *, name: str) -> None:
    """Run ``fn`` on a daemon thread and wait for it ``seconds`` at most (one that hangs is left behind:
    the process is about to end)."""
    worker = threading.Thread(target=fn, name=name, daemon=True)
    worker.start()
    worker.join(seconds)


def _quiet_shutdown(ray: ModuleType) -> None:
    try:
        ray.shutdown()
    except Exception:  # a half-connected Ray may fail to shut down: the process ends anyway
        logging.getLogger(__name__).debug("ray.shutdown() after a stop failed", exc_info=True)


STOP_DEADLINE_SECONDS = 45.0
"""How long a stopped driver may take to leave through its finally blocks (merges in flight, the summary)
before :meth:`Stops.watch` gives the lease back and ends the process.  ``ray job stop`` itself kills the
driver 3 s after its SIGTERM; a Kubernetes pod's grace period is 30 s by default."""


@dataclass
class Stops:
    """The stop signal a driver run as a program received (``ray job stop`` sends SIGTERM).

    Its handler records the signal, then leaves through the finally blocks (so the lease is given
    back).  Ray turns a signal that interrupts ``ray.get``/``ray.wait`` (where a driver spends its
    time) into ``SystemExit(1)``, which reads as "rendering failed"; the recorded signal keeps the
    exit status a stop's: 128 + its number.

    A way out that does not end (a finally block waiting on something that never comes: CI once saw a
    stopped driver still running 120 s later) is bounded by :meth:`watch`."""

    signum: int | None = None
    deadline_seconds: float = STOP_DEADLINE_SECONDS
    release: Callable[[], None] | None = None
    """Gives the work area's lease back (set once the job's runner exists); called again by the deadline."""

    def install(self) -> None:
        signal.signal(signal.SIGTERM, self.handle)

    def handle(self, signum: int, frame: FrameType | None) -> None:
        self.signum = signum
        raise SystemExit(128 + signum)

    def exit_code(self, code: int | str | None) -> int | str | None:
        """``code``, or the stop's status when a stop signal arrived."""
        return code if self.signum is None else 128 + self.signum

    def watch(self) -> None:
        """Start the deadline's thread, before any signal (no thread is started inside a signal handler):
        :data:`STOP_DEADLINE_SECONDS` after a stop, if the process is still here, it prints where every
        thread is, gives the lease back (within 10 s) and ends the process with the stop's status."""
        threading.Thread(target=self._deadline, name="stop-deadline", daemon=True).start()

    def _deadline(self) -> None:
        while self.signum is None:
            time.sleep(0.2)
        time.sleep(self.deadline_seconds)
        code = 128 + self.signum
        # Straight to the file descriptor: the main thread may hold sys.stderr's lock where it is stuck.
        os.write(
            2,
            f"recast: stopped, and still not out {self.deadline_seconds:g} s later: giving the lease back "
            "and leaving now; where each thread was:\n".encode(),
        )
        faulthandler.dump_traceback(file=2, all_threads=True)
        if self.release is not None:
            _for_at_most(10.0, self.release, name="stop-release")
        os._exit(code)


def _exit_disconnected(run: Callable[[], int], stops: Stops) -> NoReturn:
    """``run()``'s exit code (or the stop's, :class:`Stops`), after disconnecting from Ray.

    Leaving with the Ray driver still connected lets the interpreter tear down the native
    gRPC objects under Ray's own threads, which crashed the process (SIGSEGV in
    ``grpc_combiner_continue_exec_ctx``) after a ``ray job stop`` had been handled: the exit
    code then says "crashed" instead of "stopped".  ``ray.shutdown()`` first stops them in order.
    """
    try:
        code: int | str | None = run()
    except SystemExit as exc:
        code = exc.code
    finally:
        # A stop that reached Ray's failure-signal handler before ours was back (:func:`_start_ray`) left
        # its abort timer set: the shutdown below may take longer.
        signal.alarm(0)
        ray = sys.modules.get("ray")
        if ray is not None and stops.signum is not None:
            # Stopped: leave within a bound (a shutdown or teardown after a stop was once seen to hang).
            _leave_now(ray, stops.exit_code(code))
        if ray is not None and ray.is_initialized():
            ray.shutdown()
    sys.exit(stops.exit_code(code))


if __name__ == "__main__":
    # `ray job stop` sends SIGTERM: leave through the finally blocks, so the work area's lease is given back.
    driver_stops = Stops()
    driver_stops.install()
    driver_stops.watch()
    _exit_disconnected(lambda: main(stops=driver_stops), driver_stops)
