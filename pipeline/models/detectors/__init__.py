"""The detector role's model kinds: one class per kind, and the pack's detector at smaller inputs.

``scrfd`` (insightface's SCRFD family, on any Runner), ``yunet`` (the default pack's detector,
with the letterbox and face suppression the others share), ``retinaface`` (the default pack's
alternative) and ``detector_sizes`` (the pack's detector re-made for an input below the one it
was exported at, for ``faces.detect_size: auto``).  The loader picks a class by the ``kind`` a
pack declares (:data:`pipeline.models.loader.KIND_CLASSES`); import the modules themselves.
"""
