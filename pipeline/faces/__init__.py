"""The face stages: which faces of a frame are found, who they become, and how they are rendered.

``config`` (the spec's ``selection:`` and ``faces:`` blocks, and ``identities:``),
``analyze`` (detection and recognition over a batch of frames), ``detectsize`` (detection
at the resolution the faces need), ``embedplan`` (which detected faces the analysis pass
embeds), ``select`` (which faces are replaced and by whom), ``identity`` and ``pictures``
(source identities from their pictures, read within limits), and ``renderers`` (the face
renderers: CPU, and every pixel on the torch device).

Above :mod:`pipeline.models` (the role classes the stages call) and
:mod:`pipeline.geometry` (the face records and geometry both share).  Import the modules
themselves; this package re-exports nothing.
"""
