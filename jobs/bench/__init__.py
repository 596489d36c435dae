"""The benchmark's parts, behind the ``python -m jobs.benchmark`` entrypoint.

``settings`` (what to run), ``inputs`` (clips, source picture, production-cost pack),
``runs`` (the naive loop and Recast jobs, compared on one clip), ``ceiling`` (the
machine's limit per clip), ``scenarios`` (4-chunk scaling, memory, the demo job),
``suite`` (one whole run), ``report`` (derived figures, targets, the table).
Helpers: ``clips`` (the generated astronaut clip, also used by the demo), ``naive``
(the naive face-swap loop), ``memory`` (actor peak memory from ``/proc``),
``standins`` and ``onnxgraph`` (stand-in ONNX models with production contracts),
``plates`` (generated EXR/DPX plates and their ProRes 4444 twin), ``plate_figures`` and
``plate_table`` (the ``--plates`` scenario and its table), ``scale`` (the driver at scale).
Nothing here imports from ``tests/``: the cluster image runs the benchmark without it.
"""
