"""Faces followed through a shot: association frame to frame, then the whole-shot plan.

``config`` (``TrackingConfig``), ``tracker`` (``Tracker``, ``TrackerState``, ``track_chunk``: online
association across chunks; ``frames``: a chunk's detections as arrays), ``smoothing`` (non-causal landmark smoothing and gap
filling) and ``faceplan`` (``plan_shot``: identity per track, the per-frame face tasks).
Pure numpy, on the driver.

Import the modules themselves; this package re-exports nothing.
"""
