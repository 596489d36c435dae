"""The benchmark's inputs, generated on the machine: clips, the source picture, the production-cost pack.

Nothing is downloaded: the clips animate the astronaut from ``skimage.data``
(:mod:`jobs.demo_media`), the source face is insightface's sample picture, and
the production-cost pack pairs the default pack's real YuNet detector with
stand-ins of the production recognizer, swapper and enhancer
(:mod:`bench.models.standins`).  Each input is written once into the output folder
and reused by later runs.
"""

from __future__ import annotations

import os
import shutil
from typing import Any

from jobs.demo_media import make_face_clip, write_source_image

RESOLUTIONS = {"720p": (1280, 720), "1080p": (1920, 1080)}


def dims(size: str) -> tuple[int, int]:
    """Width and height of a size name (``720p``, ``1080p``) or a ``WxH`` string."""
    if size in RESOLUTIONS:
        return RESOLUTIONS[size]
    w, h = size.lower().split("x")
    return int(w), int(h)


def source_picture(folder: str) -> str:
    """The source identity picture (``source.jpg`` in ``folder``)."""
    return write_source_image(os.path.join(folder, "source.jpg"))


def make_clip(folder: str, size: str, seconds: float, fps: int) -> str:
    """The astronaut clip at ``size`` (keyframe every second so chunks can start anywhere)."""
    width, height = dims(size)
    path = os.path.join(folder, f"astronaut_{width}x{height}_{seconds:g}s_{fps}fps.mp4")
    if not os.path.exists(path):
        tmp = path + ".tmp.mp4"
        make_face_clip(tmp, seconds=seconds, fps=fps, width=width, height=height, gop=fps)
        os.replace(tmp, path)
    return path


def production_pack(folder: str, cache_dir: str, *, tiny: bool) -> str:
    """A pack folder: the default pack's real YuNet + production-cost (or tiny) stand-ins."""
    from bench.models.standins import (
        CONTRACTS,
        PRODUCTION_FILES,
        write_manifest,
        write_model,
        write_production_models,
    )
    from pipeline.models.default_pack import YUNET_CONTRACT, YUNET_FILE
    from pipeline.models.pack import load_pack

    pack_dir = os.path.join(folder, "tiny-pack" if tiny else "production-pack")
    if os.path.exists(os.path.join(pack_dir, "manifest.json")):
        return pack_dir
    os.makedirs(pack_dir, exist_ok=True)
    default = load_pack("builtin:default", cache_dir=cache_dir)
    shutil.copyfile(os.path.join(default.local_dir, YUNET_FILE), os.path.join(pack_dir, YUNET_FILE))
    entries: list[dict[str, Any]] = [
        {"role": "detector", "kind": "yunet", "file": YUNET_FILE, "contract": YUNET_CONTRACT}
    ]
    roles = ("recognizer", "swapper", "enhancer")
    if tiny:
        for role in roles:
            write_model(role, os.path.join(pack_dir, PRODUCTION_FILES[role][1]), "tiny")
    else:
        models_dir = os.path.join(folder, "models")
        write_production_models(models_dir)
        for role in roles:
            file = PRODUCTION_FILES[role][1]
            dest = os.path.join(pack_dir, file)
            try:
                os.link(os.path.join(models_dir, file), dest)  # the swapper alone is 550 MB
            except OSError:
                shutil.copyfile(os.path.join(models_dir, file), dest)
    for role in roles:
        kind, file = PRODUCTION_FILES[role]
        entries.append({"role": role, "kind": kind, "file": file, "contract": CONTRACTS[role]})
    write_manifest(pack_dir, entries, name="bench-production-cost" if not tiny else "bench-tiny")
    return pack_dir
