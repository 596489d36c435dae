"""Film plates: image sequences (EXR, DPX, TIFF) read, checked and written frame-exactly.

Ray-free.  OpenImageIO reads and writes every image, OpenColorIO converts colour,
fileseq parses the frame patterns; frame numbers and each frame's header travel
with the pixels.
"""
