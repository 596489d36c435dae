"""Review media: a dailies movie per shot, a contact sheet and a playlist of the job's movies.

``text`` (the burn-in font and text drawing, Pillow), ``layout`` (plate and output side by
side, a wipe, or the output alone, scaled to a width), ``frames`` (one review frame: the layout
plus the burn-ins an actor knows: shot, frame number, timecode, identity by each face),
``view`` (an image-sequence plate through its OCIO display/view transform to Rec.709),
``flags`` (the QC flags burnt into the merged movie once the driver has concluded them),
``contact`` (the contact sheet PNG) and ``playlist`` (the OpenTimelineIO playlist).

Imports :mod:`pipeline.store`, :mod:`pipeline.video` and :mod:`pipeline.qc` (records only); none
of those imports it back.  Import the modules themselves; this package re-exports nothing.
"""
