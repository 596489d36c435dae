"""Shots from the cut and back to the cut: an editorial timeline (``edit:``) read with OpenTimelineIO.

Before anything else looks at the job, :func:`with_edit_shots` reads the timeline
(:mod:`cluster.edit.read`), walks its video tracks (:mod:`cluster.edit.cut`), finds each clip's
media and frames (:mod:`cluster.edit.media`) and merges one ordinary shot per clip into the spec
(:mod:`cluster.edit.plan`); the :class:`EditPlan` it returns says what each clip became.  Once the
shots are published, :func:`write_timeline` writes the same cut with every rendered clip pointing
at its output (:mod:`cluster.edit.relink`).  The media of an ``.otioz`` are extracted
(:mod:`cluster.edit.bundle`) and, once the job is allowed, published to its work area
(:func:`publish_bundled`).  No Ray here: it runs in the checks before Ray.

Public API: :func:`with_edit_shots`, :class:`EditPlan`, :class:`ClipShot`,
:func:`check_timeline_output`, :func:`write_timeline`, :func:`relinked` and :func:`publish_bundled`.
"""

from cluster.edit.bundle import publish_bundled as publish_bundled
from cluster.edit.plan import ClipShot as ClipShot
from cluster.edit.plan import EditPlan as EditPlan
from cluster.edit.plan import with_edit_shots as with_edit_shots
from cluster.edit.relink import check_timeline_output as check_timeline_output
from cluster.edit.relink import relinked as relinked
from cluster.edit.relink import write_timeline as write_timeline
