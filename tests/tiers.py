"""The suite runs in tiers, fastest first, in one ``pytest`` run (the README's test command).

1. ``fast``: neither ``ray`` nor ``slow`` (no Ray, no rendering job); a few minutes.
2. ``ray``: tests that start Ray (a shared local instance, a private cluster, a job).
3. ``slow``: injected faults, ``ray job submit``, the benchmark.

Collected tests are ordered by tier (stable: within a tier they keep their file order), and
when a test of the fast tier fails the run stops at the end of that tier: a broken unit is
reported in minutes, not after the Ray jobs.  ``--all-tiers`` runs every tier regardless.
The terminal summary gives each tier's test count and wall time (CI's figures).  ``-m``
selects tiers as before (``-m "not ray and not slow"`` is the fast tier alone).
"""

from __future__ import annotations

import time
from collections.abc import Generator

import pytest

TIERS = ("fast", "ray", "slow")
_TIER_OF = pytest.StashKey[dict[str, str]]()
_LAST_FAST = pytest.StashKey[str]()
_SECONDS = pytest.StashKey[dict[str, list[float]]]()


def tier(item: pytest.Item) -> str:
    """The tier of one test: ``slow`` over ``ray`` over ``fast``."""
    if item.get_closest_marker("slow") is not None:
        return "slow"
    if item.get_closest_marker("ray") is not None:
        return "ray"
    return "fast"


def addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--all-tiers",
        action="store_true",
        default=False,
        help="run the Ray and slow tiers even when a test of the fast tier failed",
    )


def order(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Sort ``items`` by tier, in place, and note the last test of the fast tier."""
    items.sort(key=lambda item: TIERS.index(tier(item)))
    config.stash[_TIER_OF] = {item.nodeid: tier(item) for item in items}
    fast = [item.nodeid for item in items if tier(item) == "fast"]
    if fast and len(fast) < len(items):
        config.stash[_LAST_FAST] = fast[-1]
    config.stash[_SECONDS] = {name: [] for name in TIERS}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, None, None]:
    started = time.monotonic()
    yield
    config = item.config
    seconds = config.stash.get(_SECONDS, None)
    if seconds is not None:
        seconds[config.stash[_TIER_OF].get(item.nodeid, "fast")].append(time.monotonic() - started)
    session = item.session
    if (
        config.stash.get(_LAST_FAST, None) == item.nodeid
        and session.testsfailed
        and not config.getoption("--all-tiers")
    ):
        session.shouldstop = (
            f"{session.testsfailed} test(s) of the fast tier failed; the Ray and slow tiers were not run "
            "(--all-tiers runs them anyway)"
        )


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    seconds = terminalreporter.config.stash.get(_SECONDS, None)
    if not seconds:
        return
    ran = [(name, times) for name, times in seconds.items() if times]
    if ran:
        terminalreporter.write_sep("-", "tiers")
        for name, times in ran:
            terminalreporter.write_line(f"tier {name}: {len(times)} tests, {sum(times):.0f} s")
