"""One driver per work area: the lease ``<work_url>/lease.json`` and the store operations behind it.

Public API: :func:`acquire_lease` (a :class:`Lease`, refreshed until released), its
settings :class:`LeaseConfig` (the spec's ``lease:``), :class:`LeaseHeld` / :class:`LeaseLost`,
:class:`Holder`, :func:`read_holder`, :func:`lease_url` and :func:`submission_id`
(:mod:`cluster.lease.holder`; whether a holder's process is gone: :mod:`cluster.lease.process`).
"""

from cluster.lease.acquire import Lease as Lease
from cluster.lease.acquire import LeaseConfig as LeaseConfig
from cluster.lease.acquire import LeaseHeld as LeaseHeld
from cluster.lease.acquire import LeaseLost as LeaseLost
from cluster.lease.acquire import acquire_lease as acquire_lease
from cluster.lease.acquire import lease_url as lease_url
from cluster.lease.holder import Holder as Holder
from cluster.lease.holder import read_holder as read_holder
from cluster.lease.holder import submission_id as submission_id
