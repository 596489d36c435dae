"""Test helpers for the provenance tests: a throw-away test CA and signer,
and small videos (written by :func:`tests.clips.write_clip`).  Nothing here is
committed media: every file is generated at test time."""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path

import av
import numpy as np

from pipeline.provenance.credentials import ManifestInfo, SignerConfig, sign_video
from pipeline.provenance.install_key import signing_certificates
from tests.clips import ClipSpec, write_clip


def make_test_ca(folder: Path, name: str = "Recast Test", days: int = 30) -> dict[str, Path]:
    """An ES256 root CA and a signing certificate for C2PA (EKU emailProtection), made by the product's
    own :func:`~pipeline.provenance.install_key.signing_certificates`.

    Returns paths: ``chain`` (signer cert + nothing else; the root is the trust
    anchor), ``key`` (signer PKCS#8 key), ``root`` (root cert PEM).
    """
    files = signing_certificates(
        root_name=f"{name} Root CA",
        signer_name=f"{name} Signer",
        organisation="Recast Test Studio",
        days=days,
    )
    folder.mkdir(parents=True, exist_ok=True)
    paths = {"chain": folder / "chain.pem", "key": folder / "signer.key", "root": folder / "root.pem"}
    paths["chain"].write_bytes(files["signer.pem"])
    paths["root"].write_bytes(files["root.pem"])
    paths["key"].write_bytes(files["signer.key"])
    return paths


def write_video(
    path: Path | io.BytesIO, frames: Sequence[np.ndarray], *, crf: int = 23, fps: int = 24
) -> None:
    """Encode RGB uint8 frames with libx264 (yuv420p, preset medium, the encoder's GOP) to MP4."""
    height, width = frames[0].shape[:2]
    spec = ClipSpec(
        width=width,
        height=height,
        frames=len(frames),
        rate=fps,
        gop=None,
        tag_colour=False,
        timecode=None,
        audio=False,
        options={"crf": str(crf), "preset": "medium"},
    )
    write_clip(path, spec, frames, container_format="mp4")


def read_video(path: Path | io.BytesIO) -> list[np.ndarray]:
    """Every frame of a video file as RGB uint8."""
    with av.open(path, "r") as container:
        return [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]


def reencode(frames: Sequence[np.ndarray], crf: int) -> list[np.ndarray]:
    """Frames after a libx264 round trip at ``crf`` (in memory)."""
    buf = io.BytesIO()
    write_video(buf, frames, crf=crf)
    buf.seek(0)
    return read_video(buf)


def astronaut_clip(
    n_frames: int = 48, seed: int = 0
) -> tuple[list[np.ndarray], list[list[tuple[int, int, int, int]]]]:
    """A 640x480 clip of a real face (skimage's astronaut, public domain) panning
    2 px per frame, with a little sensor noise; returns frames and per-frame face boxes."""
    import cv2
    import skimage.data

    image = cv2.GaussianBlur(skimage.data.astronaut().repeat(2, 0).repeat(2, 1), (3, 3), 0)
    rng = np.random.default_rng(seed)
    frames, boxes = [], []
    for i in range(n_frames):
        dx = 2 * (i % 24)
        crop = image[20:500, 180 + dx : 820 + dx].astype(np.float32) + rng.normal(0, 2, (480, 640, 3))
        frames.append(np.clip(crop, 0, 255).astype(np.uint8))
        boxes.append([(160 - dx, 40, 400 - dx, 340)])  # the face, measured on the still
    return frames, boxes


MODEL_HASH = "3f" * 32
INFO = ManifestInfo(
    title="sh010_v001.mp4",
    job_id="nightfall-7",
    identities={"alice": "REL-2026-0042", "bob": "REL-2026-0043"},
    model_pack_sha256=MODEL_HASH,
    adapters={"alice": "9a" * 32},
    watermark_payload=0x1234ABCD,
)
"""What :func:`signed_render` signs into its video."""


def signed_render(folder: Path) -> dict[str, Path]:
    """A 48-frame render signed with :data:`INFO` by a test CA made in ``folder``: the CA's files,
    ``render`` (unsigned), ``signed`` and ``folder`` (the ``signed`` fixture, ``tests/conftest.py``)."""
    ca = make_test_ca(folder / "ca")
    ramp = np.linspace(0, 255, 320, dtype=np.uint8)[None, :, None]
    frames = [np.broadcast_to(np.roll(ramp, i * 4, axis=1), (240, 320, 3)).copy() for i in range(48)]
    write_video(folder / "render.mp4", frames)
    config = SignerConfig(certificate_chain_url=str(ca["chain"]), private_key_url=str(ca["key"]))
    sign_video(folder / "render.mp4", folder / "signed.mp4", INFO, config)
    return {**ca, "render": folder / "render.mp4", "signed": folder / "signed.mp4", "folder": folder}
