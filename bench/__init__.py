"""The benchmark suite, behind the ``python -m jobs.benchmark`` entrypoint.

At the top, one benchmark run: ``settings`` (what to run), ``inputs`` (clips, source picture,
production-cost pack), ``runs`` (the naive loop and Recast jobs, compared on one clip),
``ceiling`` (the machine's limit per clip), ``scenarios`` (4-chunk scaling, memory, the demo
job, and the optional ones below), ``suite`` (one whole run), ``report`` (derived figures,
targets, the table).  Helpers: ``naive`` (the naive face-swap loop), ``memory`` (actor peak
memory from ``/proc``), ``quality`` (a run's QC figures), ``multishot`` and ``steady`` (two
optional scenarios), ``watermark`` (the invisible watermark found and never misread; its own
command).  Sub-packages: ``analysis_pass`` (the analysis pass against the cost of its parts),
``device`` (the GPU render path and NVDEC decoding, on a GPU machine), ``film_plates``
(generated EXR/DPX plates, the ``--plates`` scenario and its table), ``driver_scale`` (the
driver at feature-film scale on simulated actors), ``models`` (stand-in ONNX models with
production contracts, and their graph builder).  The generated clips come from
:mod:`jobs.demo_media` (the demo's plate maker).

Tooling, not product: this package lies beside ``jobs/`` in a checkout and is left out of the
wheel (``pyproject.toml``, ``[tool.setuptools.packages.find] exclude``), so an installation
holds no stand-in model generator.  ``python -m jobs.benchmark`` runs from a Recast checkout
(on a cluster: ``ray job submit --working-dir .``, which ships this folder with the job).
Nothing here imports from ``tests/``.
"""
