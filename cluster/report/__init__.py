"""What a job shows: per-shot summaries, the progress line, Prometheus metrics and the report.

The report is ``report.json`` (:mod:`cluster.report.data`) plus one self-contained
``report.html`` (:mod:`cluster.report.html`, with its QC and provenance sections).

Public API: :func:`build_report`, :func:`write_report`, :class:`JobSummary`,
:class:`ShotSummary` and :class:`Progress`.  :class:`cluster.report.metrics.JobMetrics`
imports Ray, so it is imported from its module and this package stays Ray-free.
"""

from cluster.report.build import build_report as build_report
from cluster.report.build import write_report as write_report
from cluster.report.progress import Progress as Progress
from cluster.report.summary import JobSummary as JobSummary
from cluster.report.summary import ShotSummary as ShotSummary
