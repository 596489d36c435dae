"""The benchmark's parts, behind the ``python -m jobs.benchmark`` entrypoint.

``settings`` (what to run), ``inputs`` (clips, source picture, production-cost pack),
``runs`` (the naive loop and Recast jobs, compared on one clip), ``ceiling`` (the
machine's limit per clip), ``scenarios`` (4-chunk scaling, memory, the demo job),
``suite`` (one whole run), ``report`` (derived figures, targets, the table).
Helpers: ``naive``
(the naive face-swap loop), ``memory`` (actor peak memory from ``/proc``),
``standins`` and ``onnxgraph`` (stand-in ONNX models with production contracts),
``plates`` (generated EXR/DPX plates and their ProRes 4444 twin), ``plate_figures`` and
``plate_table`` (the ``--plates`` scenario and its table), ``scale`` (the driver at scale).
The generated clips come from :mod:`jobs.demo_media` (the demo's plate maker).

Tooling, not product: this package is left out of the wheel (``pyproject.toml``,
``[tool.setuptools.packages.find] exclude``), so an installation holds no stand-in
model generator.  ``python -m jobs.benchmark`` runs from a Recast checkout (on a cluster:
``ray job submit --working-dir .``, which ships this folder with the job).  Nothing here
imports from ``tests/``.
"""
