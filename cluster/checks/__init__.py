"""Everything a job checks before Ray starts: nothing here imports Ray when imported.

The shots probed and planned (:mod:`cluster.checks.prepare`), where the job writes
(:mod:`cluster.checks.destinations`, :mod:`cluster.checks.dest_names`), the studio policy
(:mod:`cluster.checks.trust`) and the driver's provenance: the policy check, signing at
publish and the audit records (:mod:`cluster.checks.provenance`).

Public API: :func:`prepare_job` and what it returns (:class:`PreparedJob`,
:class:`PlannedShot`), :func:`check_destinations`, :func:`written_urls`,
:func:`check_provenance`, :class:`JobProvenance`, :func:`authorise` and :class:`Authorisation`.
"""

from cluster.checks.destinations import check_destinations as check_destinations
from cluster.checks.destinations import written_urls as written_urls
from cluster.checks.prepare import PlannedShot as PlannedShot
from cluster.checks.prepare import PreparedJob as PreparedJob
from cluster.checks.prepare import prepare_job as prepare_job
from cluster.checks.provenance import JobProvenance as JobProvenance
from cluster.checks.provenance import check_provenance as check_provenance
from cluster.checks.trust import Authorisation as Authorisation
from cluster.checks.trust import authorise as authorise
