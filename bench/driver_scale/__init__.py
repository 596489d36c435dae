"""The driver at feature-film scale (``--scale``): the real driver against simulated actors.

``scale`` (the job, its run and its figures: driver CPU per 1,000 chunks, peak RSS, how long
actors waited for the driver) and ``scale_actors`` (the simulated render actors, hundreds of
them on a few asyncio Ray actors, sleeping for a chunk's modelled time).
"""
