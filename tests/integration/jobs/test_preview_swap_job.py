"""The built-in preview swapper on film plates: a 4K ACEScg EXR and a 4K 10-bit ACEScct DPX.

The demo's identity (the face of ``t1.jpg`` the portrait rule picks) replaces the astronaut's
face moving over 6 frames of each plate (``bench.film_plates.plates``: a face 30 % of the frame high).
QC measures the replaced track's similarity to the identity (at least 0.5) and raises no
``seam`` flag; pixels outside the rendered faces stay the plate's.
"""

from __future__ import annotations

import numpy as np
import OpenImageIO as oiio
import pytest

from bench.film_plates.plates import FORMATS, SIZES, face_box, write_sequence
from cluster.driver import run_job
from cluster.spec.job import parse_spec
from jobs.demo import pick_source_face
from jobs.demo_media import write_source_image

pytestmark = [pytest.mark.ray, pytest.mark.slow]
COUNT = 6


def _read(path: str) -> np.ndarray:
    image = oiio.ImageInput.open(path)
    assert image is not None, oiio.geterror()
    spec = image.spec()
    pixels = np.asarray(image.read_image(0, 0, 0, spec.nchannels, "float"))
    image.close()
    return pixels.reshape(spec.height, spec.width, spec.nchannels)


@pytest.mark.parametrize("name", ["exr-half-piz", "dpx-10bit-log"])
def test_the_preview_swap_on_4k_plates_is_the_identity_without_seams(name: str, ray_local, tmp_path) -> None:
    fmt, size = FORMATS[name], SIZES["4K"]
    plate = write_sequence(str(tmp_path / "in"), "sc010_plate", fmt, size, COUNT)
    source = write_source_image(str(tmp_path / "source.jpg"))
    pick = pick_source_face(source)
    out = str(tmp_path / "out" / f"sc010_recast.####.{fmt.ext}")
    spec = {
        "job_id": "preview",
        "shots": [{"name": "sc010", "url": plate}],
        "identities": {"hero": {"images": [source], "face_index": pick.index}},
        "selection": {"mode": "all", "source": "hero"},
        "output": {"url": out},
        "colour": {"plate": fmt.space},
        "resources": {"cpus_per_actor": 1, "max_actors": 2},
    }
    summary = run_job(parse_spec(spec))
    assert summary.ok, summary.table()
    qc = summary.to_dict()["shots"][0]["qc"]
    similarity = {track: t["similarity_after"] for track, t in qc["tracks"].items()}
    print(f"FIGURE {name} 4K: QC similarity to the identity {similarity}, flags {qc['counts']}")
    assert similarity and min(similarity.values()) >= 0.5, similarity
    assert qc["counts"]["seam"] == 0, qc["flags"]
    # The face changed; a band around it (outside the face square) is the plate's, bit for bit.
    for i in range(COUNT):
        number = 1001 + i
        before = _read(plate.replace("####", f"{number:04d}"))
        after = _read(out.replace("####", f"{number:04d}"))
        x0, y0, side = face_box(i, size)
        changed = np.any(before != after, axis=-1)
        assert changed[y0 : y0 + side, x0 : x0 + side].mean() > 0.02  # the inner face: 6 % of the square
        changed[
            max(0, y0 - side // 4) : y0 + side + side // 4, max(0, x0 - side // 4) : x0 + side + side // 4
        ] = False
        assert not changed.any()
