"""The job spec: the YAML a job is described by, validated, and the concrete shots it names.

Public API: :class:`JobSpec` and its loaders (:func:`parse_spec`, :func:`load_spec`,
:func:`dotted`), the sections :class:`ShotSpec`, :class:`OutputSpec` and :class:`EditSpec`, the expanded
shots (:class:`ShotRef`, :class:`ShotSettings`, :func:`expand_shots`, :func:`settings_of`,
:func:`work_url_for`, :func:`output_prefix_for`) and each shot's frame window
(:class:`ShotWindow`, :func:`shot_window`, :func:`render_chunks`).
"""

from cluster.spec.edit import EditSpec as EditSpec
from cluster.spec.job import DispatchOrder as DispatchOrder
from cluster.spec.job import JobSpec as JobSpec
from cluster.spec.job import dotted as dotted
from cluster.spec.job import load_spec as load_spec
from cluster.spec.job import parse_spec as parse_spec
from cluster.spec.output import OutputSpec as OutputSpec
from cluster.spec.shot import ShotSpec as ShotSpec
from cluster.spec.shot_refs import ShotRef as ShotRef
from cluster.spec.shot_refs import ShotSettings as ShotSettings
from cluster.spec.shot_refs import expand_shots as expand_shots
from cluster.spec.shot_refs import output_prefix_for as output_prefix_for
from cluster.spec.shot_refs import settings_of as settings_of
from cluster.spec.shot_refs import work_url_for as work_url_for
from cluster.spec.windows import ShotWindow as ShotWindow
from cluster.spec.windows import render_chunks as render_chunks
from cluster.spec.windows import shot_window as shot_window
