"""QC: the frames a supervisor should look at, instead of watching every frame.

``config`` (the spec's ``qc:`` block), ``measure`` (what a render actor measures of each
face it replaced, with the pixels it already holds), ``records`` (those measures and the
flags, as picklable records), the three checks ``coverage`` (was a face replaced on every
frame it was on screen), ``identity`` (does it look like whom it should; did a track switch
person) and ``stability`` (shaking landmarks, flicker, seams), ``marks`` (per-frame marks
merged into flags), ``staged`` (QC in two stages, so the driver holds no embeddings while a
shot renders) and ``analyze`` (a whole shot's QC list).

Reads the face records of :mod:`pipeline.geometry`, the plan of :mod:`pipeline.tracking` and the
selection of :mod:`pipeline.faces`; none of those imports it back.  Import the modules
themselves; this package re-exports nothing.
"""
