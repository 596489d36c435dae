"""The demo's inputs, made from real faces that ship inside installed packages (nothing downloaded).

* :func:`make_face_clip`: the astronaut from ``skimage.data`` animated with a
  slow pan and zoom (public domain picture), H.264 with a 440 Hz AAC tone and
  a timecode, at any size and length.  Made for the demo (``jobs/demo.py``); the
  benchmark (``bench/``) and the tests make their clips with it too.
* :func:`write_source_image`: a source identity picture: insightface's
  ``t1.jpg`` group photo (pick a face with ``face_index``), loaded from the
  installed package and written next to the job, never committed.
"""

from __future__ import annotations

import importlib.util
import math
import os
import shutil
from fractions import Fraction
from typing import Any

import av
import cv2
import numpy as np

ASTRONAUT_FACE_XY = (215.0, 130.0)
"""Roughly the centre of the astronaut's face in ``skimage.data.astronaut()`` (512x512)."""


def astronaut_rgb() -> np.ndarray:
    from skimage import data

    return np.ascontiguousarray(data.astronaut())


def pan_zoom_frame(image: np.ndarray, t: float, width: int, height: int) -> np.ndarray:
    """Frame at phase ``t`` in [0, 1]: a window that slowly zooms in and drifts around the face."""
    img_h, img_w = image.shape[:2]
    zoom = 1.15 + 0.45 * (0.5 - 0.5 * math.cos(2 * math.pi * t))  # 1.15 -> 1.6 -> 1.15
    win_w = img_w / zoom
    win_h = win_w * height / width
    if win_h > img_h:
        win_h = img_h / zoom * 1.0
        win_w = win_h * width / height
    cx = ASTRONAUT_FACE_XY[0] + 40.0 * math.sin(2 * math.pi * t)
    cy = ASTRONAUT_FACE_XY[1] + 40.0 + 25.0 * math.sin(4 * math.pi * t)
    x0 = float(np.clip(cx - win_w / 2, 0, img_w - win_w))
    y0 = float(np.clip(cy - win_h / 2, 0, img_h - win_h))
    # Sub-pixel affine warp: smooth motion, no integer jumps between frames.
    sx, sy = width / win_w, height / win_h
    matrix = np.array([[sx, 0.0, -x0 * sx], [0.0, sy, -y0 * sy]], dtype=np.float64)
    return cv2.warpAffine(
        image, matrix, (width, height), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REFLECT
    )


def make_face_clip(
    path: str,
    *,
    seconds: float = 60.0,
    fps: int = 24,
    width: int = 640,
    height: int = 360,
    gop: int = 48,
    audio: bool = True,
    timecode: str | None = "01:00:00:00",
    challenge: bool = False,
) -> str:
    """Write the animated astronaut clip to the local ``path`` (H.264 yuv420p BT.709 + AAC tone).

    ``challenge``: a hand-like occluder sweeps over the face (30-40 % of the clip) and a second
    real face (from insightface's sample picture) crosses it (60-78 %): what QC must flag.
    """
    if width % 2 or height % 2:
        raise ValueError(f"width and height must be even, got {width}x{height}")
    image = astronaut_rgb()
    frames = max(1, round(seconds * fps))
    other = second_face(height) if challenge else None
    os.makedirs(os.path.dirname(os.path.abspath(path)) or ".", exist_ok=True)
    tb = Fraction(1, fps * 512)
    with av.open(path, mode="w") as out:
        stream = out.add_stream("libx264", rate=fps)
        ctx = stream.codec_context
        ctx.width, ctx.height, ctx.pix_fmt = width, height, "yuv420p"
        ctx.time_base = tb
        stream.time_base = tb
        ctx.options = {
            "preset": "veryfast",
            "crf": "16",
            "x264-params": f"keyint={gop}:min-keyint={gop}:scenecut=0:bframes=2",
        }
        ctx.color_primaries, ctx.color_trc, ctx.colorspace, ctx.color_range = 1, 1, 1, 1  # BT.709, limited
        if timecode:
            stream.metadata["timecode"] = timecode
        astream = None
        if audio:
            astream = out.add_stream("aac", rate=48000)
            astream.layout = "mono"
        for i in range(frames):
            t = i / max(1, frames - 1) if frames > 1 else 0.0
            rgb = pan_zoom_frame(image, t, width, height)
            if other is not None:
                rgb = challenge_frame(rgb, other, t)
            frame = av.VideoFrame.from_ndarray(rgb, format="rgb24").reformat(
                format="yuv420p",
                src_colorspace="ITU709",
                dst_colorspace="ITU709",
                src_color_range="JPEG",
                dst_color_range="MPEG",
            )
            frame.pts = i * 512
            frame.time_base = tb
            out.mux(stream.encode(frame))
        out.mux(stream.encode(None))
        if astream is not None:
            total = round(frames / fps * 48000)
            times = np.arange(total) / 48000.0
            mux_mono_audio(out, astream, (0.2 * np.sin(2 * math.pi * 440.0 * times)).astype(np.float32))
    return path


def mux_mono_audio(out: Any, stream: Any, samples: np.ndarray) -> None:
    """Encode mono float samples at 48 kHz into ``stream`` in 1024-sample frames, then flush it."""
    for start in range(0, len(samples), 1024):
        block = np.ascontiguousarray(samples[start : start + 1024][None, :])
        frame = av.AudioFrame.from_ndarray(block, format="flt", layout="mono")
        frame.sample_rate = 48000
        frame.pts = start
        frame.time_base = Fraction(1, 48000)
        out.mux(stream.encode(frame))
    out.mux(stream.encode(None))


OCCLUDER_SPAN = (0.30, 0.40)
"""Part of a challenge clip (0-1) during which the occluder sweeps across the frame."""
CROSSING_SPAN = (0.60, 0.78)
"""Part of a challenge clip during which the second face crosses the frame."""


def second_face(height: int) -> np.ndarray:
    """A second real face (the sample picture's face 4, with some hair and shoulders), 0.45 of ``height``."""
    loaded = cv2.imread(insightface_image("t1.jpg"))
    if loaded is None:
        raise FileNotFoundError(insightface_image("t1.jpg"))
    picture = cv2.cvtColor(loaded, cv2.COLOR_BGR2RGB)
    crop = picture[110:320, 235:405]
    side = max(16, int(height * 0.45))
    return cv2.resize(crop, (side * crop.shape[1] // crop.shape[0], side), interpolation=cv2.INTER_AREA)


def challenge_frame(rgb: np.ndarray, other: np.ndarray, t: float) -> np.ndarray:
    """``rgb`` with the occluder or the crossing face drawn at clip phase ``t``."""
    height, width = rgb.shape[:2]
    out = rgb.copy()
    if OCCLUDER_SPAN[0] <= t <= OCCLUDER_SPAN[1]:
        u = (t - OCCLUDER_SPAN[0]) / (OCCLUDER_SPAN[1] - OCCLUDER_SPAN[0])
        cx, half = int(-0.1 * width + u * 1.2 * width), int(0.09 * width)
        # A hand: a skin-toned bar with darker fingers' gaps, over the face's height.
        top, bottom = int(0.12 * height), int(0.88 * height)
        x0, x1 = max(0, cx - half), min(width, cx + half)
        if x1 > x0:
            out[top:bottom, x0:x1] = (196, 150, 120)
            for k in range(1, 4):
                gap = x0 + k * (x1 - x0) // 4
                out[top : top + (bottom - top) // 3, max(0, gap - 1) : gap + 1] = (120, 80, 60)
    if CROSSING_SPAN[0] <= t <= CROSSING_SPAN[1]:
        u = (t - CROSSING_SPAN[0]) / (CROSSING_SPAN[1] - CROSSING_SPAN[0])
        h, w = other.shape[:2]
        x0 = int(-w + u * (width + w))
        y0 = max(0, int(0.3 * height - 0.5 * h))
        sx0, sx1 = max(0, -x0), min(w, width - x0)
        if sx1 > sx0:
            out[y0 : y0 + h, x0 + sx0 : x0 + sx1] = other[:, sx0:sx1]
    return out


def insightface_image(name: str = "t1.jpg") -> str:
    """Path of a picture shipped in the installed insightface package."""
    spec = importlib.util.find_spec("insightface")
    if spec is None or spec.origin is None:
        raise FileNotFoundError("insightface is not installed (bash infra/bootstrap.sh installs it)")
    path = os.path.join(os.path.dirname(spec.origin), "data", "images", name)
    if not os.path.exists(path):
        raise FileNotFoundError(path)
    return path


def write_source_image(path: str) -> str:
    """Copy insightface's t1.jpg group photo (6 faces) to ``path``; pick a face with ``face_index``."""
    os.makedirs(os.path.dirname(os.path.abspath(path)) or ".", exist_ok=True)
    shutil.copyfile(insightface_image("t1.jpg"), path)
    return path
