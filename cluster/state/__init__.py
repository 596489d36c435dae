"""What a job has durably finished, so a resubmitted job redoes nothing else.

The manifest in the work area (records, their signatures, a chunk's faces as npz), the
ledger the driver reads and writes it through, the cache keys a record is reused by and
the fingerprints of sources and outputs.

Public API: :class:`JobManifest`, :class:`RenderRecord`, :class:`SegmentHome`,
:class:`Ledger`, :class:`JobKeys` and its keys (:class:`AnalysisKey`, :class:`TrackKey`,
:class:`RenderKey`, :class:`ShotKey`, :class:`Fingerprint`), :func:`input_fingerprint`,
:func:`output_fingerprint` and :func:`manifest_key`.
"""

from cluster.state.fingerprints import input_fingerprint as input_fingerprint
from cluster.state.fingerprints import output_fingerprint as output_fingerprint
from cluster.state.keys import AnalysisKey as AnalysisKey
from cluster.state.keys import Fingerprint as Fingerprint
from cluster.state.keys import JobKeys as JobKeys
from cluster.state.keys import RenderKey as RenderKey
from cluster.state.keys import ShotKey as ShotKey
from cluster.state.keys import TrackKey as TrackKey
from cluster.state.ledger import Ledger as Ledger
from cluster.state.manifest import JobManifest as JobManifest
from cluster.state.manifest_sign import manifest_key as manifest_key
from cluster.state.segment_record import RenderRecord as RenderRecord
from cluster.state.segment_record import SegmentHome as SegmentHome
