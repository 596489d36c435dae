"""The product's entrypoints, thin: each parses its arguments and calls the driver or a pipeline stage.

``render`` (every shot of a job spec, on Ray: what ``ray job submit`` runs), ``demo`` (a
first job on generated media, ``demo_media``), ``verify`` (Content Credentials of a delivered
file), ``detect_watermark``, ``prepare_lora`` and ``train_adapter`` (per-identity adapters),
``spec_reference`` (the generated job-spec page), ``benchmark`` (its harness in ``bench/``,
tooling run from a checkout and left out of the wheel) and ``cli`` (what they share).
"""
