"""Film plates through the whole job: image sequences in, the same sequences out, pixels kept.

Real EXR/DPX/TIFF sequences (a real face on a scene-linear background with values
up to 8.0 and negative noise), two CPU actors on a local Ray, several chunks, the
built-in model pack.  What a delivery needs is asserted frame by frame: every
frame number back, headers and compression kept, extra channels untouched,
pixels outside the face bit-identical, highlights above 1.0 intact.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np
import OpenImageIO as oiio
import pytest

from cluster.driver import run_job
from cluster.spec.job import parse_spec
from jobs.demo_media import write_source_image
from tests.plates import write_sequence

pytestmark = pytest.mark.ray

SIZE = (640, 360)
FIRST, COUNT = 1001, 48  # 2 s at 24 fps: two 1 s chunks


def read(path: str) -> tuple[np.ndarray, oiio.ImageSpec]:
    inp = oiio.ImageInput.open(path)
    assert inp is not None, oiio.geterror()
    try:
        spec = oiio.ImageSpec(inp.spec())
        pixels = inp.read_image(0, 0, 0, spec.nchannels, "float")
        assert pixels is not None, inp.geterror()
    finally:
        inp.close()
    return np.asarray(pixels).reshape(spec.height, spec.width, spec.nchannels), spec


def sha256(path: str) -> str:
    with open(path, "rb") as fh:
        return hashlib.sha256(fh.read()).hexdigest()


def face_region(index: int) -> tuple[slice, slice]:
    """Where tests.plates draws the face in frame ``index``, grown by a fifth of its size."""
    width, height = SIZE
    side = max(8, int(height * 0.6))
    x0, y0 = min(width - side, width // 4 + 2 * index), (height - side) // 2
    grow = side // 5
    return slice(max(0, y0 - grow), y0 + side + grow), slice(max(0, x0 - grow), x0 + side + grow)


def assert_marked_delivery(pattern: str, count: int, capsys: pytest.CaptureFixture[str]) -> None:
    """The delivered sequence is marked as AI-made: every frame whose faces were replaced says so in its
    header, the signed sidecar verifies (every frame's sha256, trusted with the installation's root),
    and a frame changed afterwards makes it fail, naming the frame."""
    from jobs import verify
    from pipeline.provenance.install_key import signing_dir
    from pipeline.provenance.sidecar import read_ai_attribute

    paths = [pattern.replace("####", f"{n:04d}") for n in range(FIRST, FIRST + count)]
    stated = [p for p in paths if read_ai_attribute(p)]
    assert len(stated) >= count * 3 // 4, f"{len(stated)}/{count} frames state the AI modification"
    assert all("faces replaced" in str(read_ai_attribute(p)) for p in stated)
    root = str(signing_dir() / "root.pem")
    capsys.readouterr()
    assert verify.main([pattern, "--trust-anchors", root]) == verify.EXIT_OK
    said = capsys.readouterr().out
    assert "valid (trusted signer)" in said and "faces replaced by AI: yes" in said, said
    assert f"frames checked: {count} ({len(stated)} AI-modified)" in said, said
    # One byte changed in a frame's pixels (the last bytes of the file): the delivery no longer verifies.
    victim = paths[count // 2]
    data = bytearray(Path(victim).read_bytes())
    data[-2] ^= 0xFF
    Path(victim).write_bytes(bytes(data))
    assert verify.main([pattern, "--trust-anchors", root]) == verify.EXIT_INVALID
    said = capsys.readouterr().out
    assert f"{os.path.basename(victim)}: changed after signing" in said, said


def job(source: str, plate: str, out_pattern: str, **extra) -> dict:
    data = {
        "job_id": "plates",
        "shots": [{"name": "sc010", "url": plate}],
        "identities": {"hero": {"images": [source], "face_index": 0}},
        "output": {"url": out_pattern},
        "chunking": {"seconds": 1, "min_seconds": 1},
        "resources": {"cpus_per_actor": 0.5, "max_actors": 2, "max_inflight_per_actor": 2},
        "faces": {"batch_size": 4},
    }
    data.update(extra)
    return data


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> str:
    return write_source_image(str(tmp_path_factory.mktemp("plates-src") / "source.jpg"))


CASES = {
    "exr-half-piz": {"fmt": "exr", "pixel": "half", "compression": "piz", "extra_channels": ("A", "Z")},
    "exr-float-dwaa": {"fmt": "exr", "pixel": "float", "compression": "dwaa"},
    "tiff-16": {"fmt": "tiff", "pixel": "uint16", "compression": "zip", "colour_space": None},
}


@pytest.mark.parametrize("case", list(CASES))
def test_sequence_round_trip(ray_local, source, tmp_path, capsys, case: str) -> None:
    params = CASES[case]
    plate = write_sequence(tmp_path / "plates", "sc010_plate", first=FIRST, count=COUNT, size=SIZE, **params)
    ext = plate.rsplit(".", 1)[1]
    out = str(tmp_path / "out" / f"sc010_recast.####.{ext}")
    data = job(source, plate, out)
    if params["fmt"] == "tiff":
        data["shots"][0]["fps"] = 24  # TIFF states no frame rate
    summary = run_job(parse_spec(data))
    assert summary.ok, summary.table()
    (shot,) = summary.shots
    assert shot.status == "published" and shot.frames == COUNT and shot.chunks == 2
    assert shot.faces_swapped >= COUNT // 2, shot.faces_swapped
    names = sorted(n for n in os.listdir(tmp_path / "out") if not n.startswith("."))
    frames = [f"sc010_recast.{n:04d}.{ext}" for n in range(FIRST, FIRST + COUNT)]
    # Every frame, and the signed sidecar manifest that marks the delivery as AI-made (issue 43).
    assert names == sorted([*frames, "sc010_recast.credentials.json"]), names
    assert shot.credentials_url == str(tmp_path / "out" / "sc010_recast.credentials.json")
    lossy = params["compression"] == "dwaa"
    if lossy:
        # Re-encoding DWAA would change untouched pixels: rendered frames are written ZIP, said so.
        assert any("dwaa (lossy)" in w for w in summary.warnings), summary.warnings
    changed_frames = 0
    for i, number in enumerate(range(FIRST, FIRST + COUNT)):
        src, src_spec = read(plate.replace("####", f"{number:04d}"))
        dst, dst_spec = read(out.replace("####", f"{number:04d}"))
        # Header kept: channels, pixel types, compression, timecode and the rest.
        assert dst_spec.channelnames == src_spec.channelnames
        assert dst_spec.format == src_spec.format
        assert [str(t) for t in dst_spec.channelformats] == [str(t) for t in src_spec.channelformats]
        for attr in ("smpte:TimeCode", "FramesPerSecond", "colorspace", "Software", "DateTime"):
            assert str(dst_spec.getattribute(attr)) == str(src_spec.getattribute(attr)), attr
        compression = src_spec.getattribute("compression")
        assert dst_spec.getattribute("compression") == ("zip" if lossy else compression)
        changed = np.any(src != dst, axis=-1)
        rows, cols = face_region(i)
        outside = changed.copy()
        outside[rows, cols] = False
        # Bit-identical outside the face, NaN-free comparison on float data.
        assert not outside.any(), f"frame {number}: {int(outside.sum())} pixels changed outside the face"
        if params["fmt"] == "exr":
            # Extra channels are never touched; highlights above 1.0 outside the face are intact.
            rgb = [src_spec.channelnames.index(c) for c in "RGB"]
            others = [k for k in range(src_spec.nchannels) if k not in rgb]
            assert np.array_equal(src[..., others], dst[..., others])
            assert (dst[~changed][:, rgb] > 1.0).sum() == (src[~changed][:, rgb] > 1.0).sum() > 0
        changed_frames += bool(changed[rows, cols].sum() > 500)
    assert changed_frames >= COUNT * 3 // 4, f"the face changed in only {changed_frames}/{COUNT} frames"
    assert_marked_delivery(out, COUNT, capsys)


def test_dpx_log_frames_and_handles(ray_local, source, tmp_path) -> None:
    """``frames:`` renders 1010-1030; handles are analysed, not delivered; every other frame is the source's."""
    plate = write_sequence(
        tmp_path / "plates", "sc020_plate", fmt="dpx", pixel="uint10", compression=None,
        colour_space="ACEScct", first=FIRST, count=COUNT, size=SIZE,
    )  # fmt: skip
    out = str(tmp_path / "out" / "sc020_recast.####.dpx")
    data = job(source, plate, out, output={"url": out, "include_handles": False})
    data["shots"][0].update({"frames": "1010-1030", "handles": 4, "colour": {"plate": "ACEScct"}})
    summary = run_job(parse_spec(data))
    assert summary.ok, summary.table()
    (shot,) = summary.shots
    assert shot.frames == COUNT
    rendered = set(range(1010, 1031))
    changed = 0
    for number in range(FIRST, FIRST + COUNT):
        src = plate.replace("####", f"{number:04d}")
        dst = out.replace("####", f"{number:04d}")
        if number not in rendered:
            assert sha256(dst) == sha256(src), f"frame {number} is not the source's"
            continue
        a, a_spec = read(src)
        b, b_spec = read(dst)
        assert b_spec.get_int_attribute("oiio:BitsPerSample") == 10
        assert b_spec.getattribute("dpx:Transfer") == a_spec.getattribute("dpx:Transfer")
        diff = np.any(np.rint(a * 1023) != np.rint(b * 1023), axis=-1)
        changed += bool(diff.sum() > 500)
    assert changed >= len(rendered) * 3 // 4, f"the face changed in only {changed}/{len(rendered)} frames"


def test_resume_rewrites_only_unrecorded_frames(ray_local, source, tmp_path) -> None:
    """A run that died with chunk 1 half written: the resubmission keeps chunk 0's recorded frames."""
    plate = write_sequence(tmp_path / "plates", "sc040_plate", first=FIRST, count=COUNT, size=SIZE)
    out_dir = tmp_path / "out"
    out = str(out_dir / "sc040.####.exr")
    first = run_job(parse_spec(job(source, plate, out)))
    assert first.ok, first.table()
    frames = {n: sha256(out.replace("####", f"{n:04d}")) for n in range(FIRST, FIRST + COUNT)}
    # What a killed run leaves: chunk 1 not recorded, one of its frames missing, no published shot.
    manifest = out_dir / ".recast-work" / "plates" / "manifest" / "sc010"
    (manifest / "shot.json").unlink()
    (manifest / "render-00001.json").unlink()
    os.remove(out.replace("####", f"{FIRST + COUNT - 1:04d}"))
    again = run_job(parse_spec(job(source, plate, out)))
    assert again.ok, again.table()
    (shot,) = again.shots
    assert shot.chunks_reused == 1 and shot.chunks_rendered == 1 and shot.analyses_run == 0
    assert {n: sha256(out.replace("####", f"{n:04d}")) for n in frames} == frames
    # A recorded frame that changed since is not trusted: its chunk is rendered again.
    (manifest / "shot.json").unlink()
    Path(out.replace("####", f"{FIRST:04d}")).write_bytes(b"not a frame")
    third = run_job(parse_spec(job(source, plate, out)))
    assert third.ok and third.shots[0].chunks_rendered == 1 and third.shots[0].chunks_reused == 1
    assert {n: sha256(out.replace("####", f"{n:04d}")) for n in frames} == frames
