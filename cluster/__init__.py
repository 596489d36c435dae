"""The driver side of Recast: one job spec in, every shot rendered on a Ray actor pool, published.

One sub-package per concern; each ``__init__`` names its public API.  Lower ones never
import higher ones (``tests/test_hygiene.py`` checks it)::

    driver.py    the job driver: checks, lease, then the event loop, then the report
    schedule/    the event loop, planning, the actor pool, dispatch and the observer
    checks/      everything checked before Ray starts: shots, destinations, studio policy
    publish/     merging a shot's segments and publishing its output
    state/       what a job has durably finished: manifest, ledger, cache keys, fingerprints
    report/      what a job shows: summary, progress, metrics, report.json and report.html
    spec/        the job spec, its shots and their frame windows
    lease/       one driver per work area
"""
