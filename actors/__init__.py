"""Render actors: Ray actors that hold warm model sessions and analyse and render chunks of shots.

``render`` (``RenderWorker``, the actor: warm sessions, ``analyze_chunk``, ``render_chunk``),
``config`` (``RenderConfig``, what every actor of a job is set up with),
``batches`` (one chunk's frames rendered batch by batch: faces, marks, mattes, QC measures),
``chunkframes`` (where a chunk's frames come from: the decoder, or the pictures its analysis
kept), ``segments`` (a video chunk's encoded segments, the output's and one per pass),
``plates`` (image-sequence chunks: frames read in parallel, rendered, written whole),
``marking`` (watermark and review label), ``review`` (a chunk's review-movie segment, burnt
in), ``consent`` (identity pictures embedded for the consent check), ``output`` (what an actor returns, redacted) and ``results`` (the small,
picklable records the driver reads: ``SegmentResult``, ``ChunkAnalysis``, ``ActorInfo``).

The only layer besides ``cluster/`` that imports Ray; below it sits ``pipeline/``.
"""
