"""Finding 8 of issue 29: reads without a bound.

(a) An identity picture is decoded only when its size was read from its header, in a format
OpenCV reads as the same one; (c) consent reference embeddings are capped at 4 MiB and their
``.npy`` header is checked before any array is made; a MOV's ``moov`` is walked, never read whole.
"""

from __future__ import annotations

import io
import struct
import tracemalloc
import zipfile
from pathlib import Path

import cv2
import numpy as np
import pytest
from PIL import Image

from cluster.state.face_npz import faces_from_npz, faces_to_npz
from pipeline.errors import InputRefused, SpecError
from pipeline.faces.pictures import load_picture
from pipeline.provenance.consent import read_embeddings
from pipeline.video.colr import read_colr
from tests.hostile_inputs import radiance_hdr

FIELD = "studio.yaml#identities.hero.reference_embedding_url"


def test_picture_sized_only_by_decoding_is_refused(tmp_path) -> None:
    """A small real ``.hdr`` OpenCV decodes: Pillow cannot size it, so it is not decoded at all."""
    path = radiance_hdr(tmp_path / "hero.hdr", 64, 48)
    assert cv2.imdecode(np.frombuffer(path.read_bytes(), np.uint8), cv2.IMREAD_COLOR).shape == (48, 64, 3)
    with pytest.raises(
        InputRefused, match="size cannot be read from its header, so it is not decoded"
    ) as err:
        load_picture(str(path))
    assert err.value.url == str(path)


@pytest.mark.parametrize("fmt", ["GIF", "ICO"])
def test_formats_outside_the_sized_set_are_refused(tmp_path, fmt) -> None:
    path = tmp_path / f"hero.{fmt.lower()}"
    Image.new("RGB", (32, 32), (200, 10, 10)).save(path, format=fmt)
    with pytest.raises(InputRefused, match=f"a {fmt} picture is not decoded"):
        load_picture(str(path))


@pytest.mark.parametrize("fmt", ["JPEG", "PNG", "TIFF", "WEBP", "BMP", "PPM"])
def test_sized_formats_still_load(tmp_path, fmt) -> None:
    path = tmp_path / f"hero.{fmt.lower()}"
    Image.new("RGB", (40, 30), (200, 10, 10)).save(path, format=fmt)
    assert load_picture(str(path)).shape == (30, 40, 3)


def _save(path: Path, array: np.ndarray, **kwargs: object) -> Path:
    np.save(path, array, **kwargs)  # type: ignore[arg-type]
    return path


def test_embedding_over_4_mib_is_refused(tmp_path) -> None:
    path = _save(tmp_path / "ref.npy", np.ones((2100, 512), np.float32))  # 4.1 MiB of real rows
    with pytest.raises(SpecError) as err:
        read_embeddings(str(path), FIELD)
    assert err.value.field == FIELD and str(path) in str(err.value) and "larger than 4 MiB" in str(err.value)
    assert read_embeddings(
        str(_save(tmp_path / "ok.npy", np.ones((2000, 512), np.float32))), FIELD
    ).shape == (
        2000,
        512,
    )


def test_pickled_object_array_is_refused_unloaded(tmp_path) -> None:
    path = _save(tmp_path / "ref.npy", np.array([{"a": 1}, None], dtype=object), allow_pickle=True)
    with pytest.raises(SpecError, match="holds object, not real numbers"):
        read_embeddings(str(path), FIELD)


def test_header_claiming_a_huge_array_is_refused_before_allocating(tmp_path) -> None:
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        header, {"descr": "<f8", "fortran_order": False, "shape": (10**9, 512)}
    )
    path = tmp_path / "ref.npy"
    path.write_bytes(header.getvalue() + b"\0" * 4096)
    tracemalloc.start()
    try:
        with pytest.raises(SpecError, match=r"says \(1000000000, 512\) float64 \(4,096,000,000,000 bytes\)"):
            read_embeddings(str(path), FIELD)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20  # the 4 MiB read buffer, no array


@pytest.mark.parametrize("dtype", [np.complex64, np.bool_, "<U8"])
def test_embeddings_must_be_real_numbers(tmp_path, dtype) -> None:
    path = _save(tmp_path / "ref.npy", np.ones((2, 16), dtype))
    with pytest.raises(SpecError, match="not real numbers"):
        read_embeddings(str(path), FIELD)


def test_moov_claiming_2_gib_is_walked_not_read(tmp_path) -> None:
    path = tmp_path / "plate.mov"
    with open(path, "wb") as fh:
        fh.write(struct.pack(">I4s", 20, b"ftyp") + b"qt  " + bytes(8))
        fh.write(struct.pack(">I4s", 1, b"moov") + struct.pack(">Q", 2 << 30))  # 64-bit size, all zeros after
        fh.truncate(20 + (2 << 30))
    tracemalloc.start()
    try:
        assert read_colr(str(path)) is None
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 << 20, f"reading the colr box used {peak:,} bytes"


def test_forged_analysis_npz_is_refused_before_allocating() -> None:
    """A manifest's analysis npz whose member header claims a huge array (the record's sha256 can be
    forged too when the manifest is not signed): ValueError, which the manifest treats as absent."""

    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<i4", "fortran_order": False, "shape": (10**12,)})
    stored, deflated = io.BytesIO(), io.BytesIO()
    with zipfile.ZipFile(stored, "w") as archive:
        archive.writestr("counts.npy", header.getvalue() + bytes(64))
    with zipfile.ZipFile(deflated, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("counts.npy", header.getvalue() + bytes(64))
    with pytest.raises(ValueError, match=r"member counts.npy: its header says \(1000000000000,\) int32"):
        faces_from_npz(stored.getvalue())
    with pytest.raises(ValueError, match="member counts.npy is compressed"):
        faces_from_npz(deflated.getvalue())
    assert faces_from_npz(faces_to_npz([[], []])) == [[], []]
