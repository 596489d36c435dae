"""Compositing passes: the matte, the face layer and the tracks of every rendered shot.

* ``matte``: the exact blend mask of every frame (all faces, the same feathering and
  occlusion that made the output), float 0..1;
* ``face``: the replaced face layer premultiplied by that matte, so that
  ``face + plate * (1 - matte)`` is the output;
* ``tracks``: per track and frame the box, landmarks before and after smoothing, the
  identity and whether the face was detected, bridged or missing (JSON lines), plus a
  Nuke ``.chan`` file per track.

Both are EXR sequences (half float; a float plate's face float): with the plate's frame
numbers for image sequences, with a video's (from 0) for video (:mod:`pipeline.passes.video`);
the face in scene-linear, tagged.
"""
