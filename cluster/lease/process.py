"""Whether a lease's holder process still exists, judged from the host it ran on.

A holder records, besides its host name and pid, what makes the pid mean one process:

* ``boot_id``: the kernel's ``/proc/sys/kernel/random/boot_id``, one per machine per boot
  (shared by every container on that kernel; a reboot changes it, and pids with it);
* ``pid_ns``: its pid namespace (``/proc/self/ns/pid``, e.g. ``pid:[4026531836]``): two
  containers on one kernel see different processes under the same pid;
* ``pid_start``: its start time, field 22 of ``/proc/<pid>/stat`` (clock ticks after boot).

A driver whose host name, boot id and pid namespace are the holder's sees the processes the
holder saw.  There the holder is gone when its pid does not exist (``kill(pid, 0)``: a pid
that ``hidepid`` hides but that exists is live), is a zombie, or is now a process started
at another time (the pid was reused).  Anything missing (not Linux, ``/proc`` unreadable, a
lease written before these fields): it cannot be judged from here, so only the lease's
expiry or ``--force-takeover`` frees it.
"""

from __future__ import annotations

import datetime as dt
import os
import socket
from dataclasses import dataclass

BOOT_ID = "/proc/sys/kernel/random/boot_id"
PID_NAMESPACE = "/proc/self/ns/pid"
EXITED_STATES = ("Z", "X")
"""``/proc/<pid>/stat`` states of a process that has exited and awaits (or is past) its reaping."""


@dataclass(frozen=True)
class ProcessIdentity:
    """One process: where it runs and which one it is there."""

    host: str
    boot_id: str | None
    pid_ns: str | None
    pid: int
    pid_start: int | None


def this_process() -> ProcessIdentity:
    pid = os.getpid()
    stat = _stat(pid)
    return ProcessIdentity(
        host=socket.gethostname(),
        boot_id=_read_text(BOOT_ID),
        pid_ns=_pid_namespace(),
        pid=pid,
        pid_start=stat[1] if stat is not None else None,
    )


def same_host(holder: ProcessIdentity, here: ProcessIdentity) -> bool:
    """Whether ``here`` sees the processes ``holder`` saw (every part of the identity known and equal)."""
    if None in (holder.boot_id, holder.pid_ns, holder.pid_start, here.boot_id, here.pid_ns):
        return False
    return (holder.host, holder.boot_id, holder.pid_ns) == (here.host, here.boot_id, here.pid_ns)


def why_gone(holder: ProcessIdentity, here: ProcessIdentity | None = None) -> str | None:
    """Why ``holder``'s process no longer exists ("pid 123 not running", ...), or None when it
    runs, or ran where it cannot be judged from ``here`` (this process by default)."""
    if not same_host(holder, here or this_process()):
        return None
    pid = holder.pid
    if type(pid) is not int or pid <= 0:  # as read from a lease: kill(0) or kill(-1) would mean a group
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return f"pid {pid} not running"
    except PermissionError:
        pass  # another user's process: it exists
    stat = _stat(pid)
    if stat is None:
        return None  # it exists, but /proc hides it: cannot tell its start time
    state, started = stat
    if state in EXITED_STATES:
        return f"pid {pid} has exited (a zombie not yet reaped)"
    if started != holder.pid_start:
        return (
            f"pid {pid} is now another process, started {describe_start(started)}; "
            f"the holder's started {describe_start(holder.pid_start)}"
        )
    return None


def describe_start(ticks: int | None) -> str:
    """Clock ticks after boot as a UTC time (this host's boot time), or "at an unknown time"."""
    boot = _boot_time()
    if ticks is None or boot is None:
        return "at an unknown time"
    at = boot + ticks / os.sysconf("SC_CLK_TCK")
    return dt.datetime.fromtimestamp(at, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _stat(pid: int) -> tuple[str, int] | None:
    """The state and start time (clock ticks after boot) of ``pid``; None when it cannot be read."""
    text = _read_text(f"/proc/{pid}/stat")
    if text is None:
        return None
    # "pid (comm) state ppid ...": comm may hold spaces and parentheses, so split after the last ")".
    fields = text.rpartition(")")[2].split()
    try:
        return fields[0], int(fields[19])
    except (IndexError, ValueError):
        return None


def _boot_time() -> float | None:
    for line in (_read_text("/proc/stat") or "").splitlines():
        if line.startswith("btime "):
            return float(line.split()[1])
    return None


def _pid_namespace() -> str | None:
    try:
        return os.readlink(PID_NAMESPACE)
    except OSError:
        return None


def _read_text(path: str) -> str | None:
    try:
        with open(path, encoding="ascii", errors="replace") as fh:
            return fh.read().strip() or None
    except OSError:
        return None
