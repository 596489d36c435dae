"""Video containers and codecs: what a movie file holds, and frames in and out of it.

``probe`` (``VideoInfo``), ``decode`` / ``decoders`` / ``nvdec`` / ``decoded_cache``
(frames out, on CPU or NVDEC, cached), ``encode`` / ``merge`` / ``untouched`` /
``pixfmt`` (segments in, joined into the delivered file, untouched frames copied),
``chunking`` (a shot cut into chunks), ``timecode`` and ``colr`` (container metadata),
and ``sequence_types`` (the records of an image sequence that a ``VideoInfo`` may carry;
the sequences themselves are read by :mod:`pipeline.plates`, which imports this package,
never the reverse).

Import the modules themselves; this package re-exports nothing.
"""
