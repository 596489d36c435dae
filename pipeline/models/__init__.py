"""Model packs and the model roles: what a pack holds, verified, and one class per model kind.

``pack`` (a folder at a URL with ``manifest.json``, fetched and checked against its
sha256s), ``verified`` (which local files this process has hashed), ``default_pack``
(the embedded ``builtin:default`` pack, built offline from installed packages),
``contracts`` (each kind's input/output contract, checked before a session is made),
``roles`` (what each role offers the rest of the pipeline) and ``loader`` (a verified
pack's role objects, one session per file).  One module per model kind: the detectors in
``detectors`` (``scrfd``, ``retinaface``, ``yunet``, and ``detector_sizes``), recognizers
``arcface``, ``sface``, swappers ``inswapper``, ``builtin_swapper``, enhancer ``gfpgan``,
occlusion ``xseg``.  ``runtime`` runs them: ONNX Runtime (default) or torch.

Below :mod:`pipeline.faces` (which calls the roles); uses :mod:`pipeline.geometry` for
the face records and alignment.  Import the modules themselves; this package re-exports
nothing.
"""
