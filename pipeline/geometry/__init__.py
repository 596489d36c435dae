"""Faces before any model or stage: the records and the pure-numpy geometry on them.

``types`` (``Face``, ``FaceTask``, ``Identity``: what a detector fills, the planner
emits and a swapper reads), ``align`` (similarity to a template, crops warped out),
``blend`` (masks, colour match, crops pasted back) and ``boxes`` (``box_iou``).

Below both :mod:`pipeline.models` and :mod:`pipeline.faces`, so the models can use faces'
types and geometry without importing the face stages back.  Import the modules
themselves; this package re-exports nothing.
"""
