"""Compositing passes: the matte, the face layer and the tracks of every rendered shot.

* ``matte``: the exact blend mask of every frame (all faces, the same feathering and
  occlusion that made the output), float 0..1;
* ``face``: the replaced face layer premultiplied by that matte, so that
  ``face + plate * (1 - matte)`` is the output;
* ``tracks``: per track and frame the box, landmarks before and after smoothing, the
  identity and whether the face was detected, bridged or missing (JSON lines), plus a
  Nuke ``.chan`` file per track.

Video outputs get ProRes 4444 movies (the matte in alpha); image sequences get 16-bit
half EXR sequences with the plate's frame numbers.
"""
