"""The face pass a compositor merges: scene-linear, premultiplied there, tagged, timed like the plate.

On a 4K 10-bit ACEScct DPX plate, a half-float ACEScg EXR plate and a 16-bit sRGB TIFF plate: a
face is painted in through a soft matte the way the renderer merges it back (model-space change,
plate pixels elsewhere untouched), the passes are written by the render actor's own code, and the
compositor's recipe (the plate made scene-linear by OCIO, then ``face + plate * (1 - matte)``) gives
the output made scene-linear, to half-float precision.  Each pass carries the plate's frame rate and
timecode; the face pass names its colour space and chromaticities.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import numpy as np
import OpenImageIO as oiio
import PyOpenColorIO as ocio
import pytest

from actors.plates import write_layers
from pipeline.passes.layers import face_layer, pass_header, sequence_pass_pixels
from pipeline.plates.colour import CHROMATICITIES, PlateConverter, find_space
from pipeline.plates.frames import merge_back, read_frame
from pipeline.plates.probe import probe_sequence, timecode_of
from pipeline.plates.sequence import parse_sequence_url
from pipeline.video.sequence_types import ColourRequest
from tests.plates import SRGB, scene_linear, write_sequence

AP1 = CHROMATICITIES["lin_ap1_scene"]
CASES = {
    "dpx-acescct-4k": {"fmt": "dpx", "pixel": "uint10", "colour_space": "ACEScct", "size": (4096, 2160)},
    "exr-acescg": {"fmt": "exr", "pixel": "half", "colour_space": "ACEScg", "size": (640, 360)},
    "tiff-srgb": {
        "fmt": "tiff",
        "pixel": "uint16",
        "colour_space": SRGB,
        "compression": None,
        "size": (640, 360),
    },
}


def _read(path: str) -> tuple[np.ndarray, oiio.ImageSpec]:
    image = oiio.ImageInput.open(path)
    assert image is not None, oiio.geterror()
    spec = image.spec()
    pixels = np.asarray(image.read_image(0, 0, 0, spec.nchannels, "float"))
    image.close()
    return pixels.reshape(spec.height, spec.width, spec.nchannels), spec


@pytest.mark.parametrize("case", sorted(CASES))
def test_face_pass_is_scene_linear_premultiplied_and_tagged(case: str, tmp_path: Path) -> None:
    settings = dict(CASES[case])
    size = settings.pop("size")
    url = write_sequence(tmp_path / "plates", "sc010_plate", count=1, size=size, **settings)
    info = probe_sequence(url, fps=Fraction(24), colour=ColourRequest(plate_space=settings["colour_space"]))
    seq = info.sequence
    assert seq is not None
    converter = PlateConverter(seq.colour, seq)
    frame = read_frame(info, 0, converter)

    # A face painted in through a soft round matte filling about 5 % of the frame, as the renderer does.
    height, width = frame.rgb.shape[:2]
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
    radius = 0.13 * height
    distance = np.hypot(yy - height / 2, xx - width / 2) / radius
    matte = np.clip((1.2 - distance) / 0.4, 0.0, 1.0).astype(np.float32)
    target = np.array([52000, 30000, 21000], np.float32)
    rendered = frame.rgb.astype(np.float32) * (1 - matte[..., None]) + target * matte[..., None]
    rendered = np.where(matte[..., None] > 0, np.rint(rendered), frame.rgb).astype(frame.rgb.dtype)
    out = merge_back(frame, rendered, converter)

    header = pass_header(info)
    assert header.space == converter.pass_space
    layers = {
        name: parse_sequence_url(str(tmp_path / "out" / f"sc010_{name}.####.exr"))
        for name in ("matte", "face")
    }
    (tmp_path / "out").mkdir()
    written = write_layers(
        frame.pixels,
        out,
        matte,
        number=frame.pts,
        patterns=layers,
        header_spec=frame.spec,
        to_pass=converter.to_pass,
        pass_header=header,
        rgb=converter.rgb,
    )
    assert set(written) == {"matte", "face"}
    number = info.frame_number(0)
    face, face_spec = _read(layers["face"].frame_url(number))
    matte_read, matte_spec = _read(layers["matte"].frame_url(number))

    # Tagged: the face in ACEScg (the default config's scene_linear) with AP1 chromaticities; both
    # passes at the plate's rate and timecode.
    assert converter.pass_space == "ACEScg"
    assert face_spec.getattribute("colorspace") == "ACEScg"
    config = ocio.Config.CreateFromFile("ocio://default")
    assert find_space(config, face_spec.getattribute("oiio:ColorSpace")) == "ACEScg"  # OIIO may write its ID
    assert np.allclose(face_spec.getattribute("chromaticities"), AP1)
    plate_header = _read(url.replace("####", f"{number:04d}"))[1]
    for spec in (face_spec, matte_spec):
        assert tuple(spec.getattribute("FramesPerSecond")) == (24, 1)
        assert timecode_of(spec) == timecode_of(plate_header)
    assert timecode_of(plate_header) == (None if settings["fmt"] == "tiff" else "01:00:00:00")
    # The matte is coverage: no colour space, but the shot's comp-space chromaticities like every pass EXR.
    assert matte_spec.getattribute("colorspace") is None
    assert np.allclose(matte_spec.getattribute("chromaticities"), AP1)
    assert matte_read.shape[-1] == 1

    # The comp recipe in scene-linear gives the output back, to half-float precision.
    rgb = list(converter.rgb)
    plate_linear = scene_linear(converter.normalise(frame.pixels[..., rgb]), seq.colour.plate_space)
    out_linear = scene_linear(converter.normalise(out[..., rgb]), seq.colour.plate_space)
    alpha = face[..., 3:4]
    assert np.array_equal(alpha, matte_read) and np.allclose(alpha[..., 0], matte, atol=1e-3)
    composite = face[..., :3] + plate_linear * (1 - alpha)
    error = np.abs(composite - out_linear)
    assert error.max() <= 2e-3 * max(1.0, float(np.abs(out_linear).max())), error.max()
    inside = matte > 0.99
    assert inside.sum() > 0.015 * matte.size  # solid inside; the soft edge makes it about 5 % of the frame
    assert np.abs(out_linear[inside] - plate_linear[inside]).mean() > 0.05  # the face did change
    # Premultiplied in log and merged in linear (what the pass was before) misses at the edges.
    if seq.colour.plate_space != "ACEScg":
        log_face = converter.normalise(out[..., rgb]) - converter.normalise(frame.pixels[..., rgb]) * (
            1 - matte[..., None]
        )
        naive = scene_linear(log_face, seq.colour.plate_space) + plate_linear * (1 - matte[..., None])
        edge = (matte > 0.05) & (matte < 0.95)
        assert np.abs(naive - out_linear)[edge].max() > 10 * error.max()


def test_pass_frames_the_publish_fills_in_carry_the_same_header(tmp_path: Path) -> None:
    """Frames no actor rendered (e.g. outside a shot's range) get empty passes with the same tags."""
    from cluster.publish.sequences import complete_sequence

    url = write_sequence(
        tmp_path / "plates", "sc020_plate", fmt="dpx", pixel="uint10", colour_space="ACEScct", count=2
    )
    info = probe_sequence(url, colour=ColourRequest(plate_space="ACEScct"))
    out = tmp_path / "out"
    out.mkdir()
    passes = {name: (str(out / f"sc020_{name}.####.exr"), []) for name in ("matte", "face")}
    published = complete_sequence(info, str(out / "sc020.####.dpx"), [], passes)
    assert set(published.passes) == {"matte", "face"}
    face, face_spec = _read(str(out / "sc020_face.1001.exr"))
    matte, matte_spec = _read(str(out / "sc020_matte.1001.exr"))
    assert not face.any() and not matte.any()
    assert face_spec.getattribute("colorspace") == "ACEScg"
    assert np.allclose(face_spec.getattribute("chromaticities"), AP1)
    assert (
        tuple(face_spec.getattribute("FramesPerSecond"))
        == tuple(matte_spec.getattribute("FramesPerSecond"))
        == (24, 1)
    )
    assert matte_spec.getattribute("colorspace") is None


def test_the_face_is_computed_where_the_render_touched_and_is_exactly_zero_elsewhere() -> None:
    """Only the box of the matte and of changed pixels is converted: the same values as converting the
    whole frame, a burnt-in label outside the matte kept (so face + plate * (1 - matte) is the output)."""
    rng = np.random.default_rng(5)
    plate = rng.integers(0, 65535, (120, 160, 3), dtype=np.uint16)
    out = plate.copy()
    matte = np.zeros((120, 160), np.float32)
    matte[40:80, 60:110] = rng.random((40, 50), dtype=np.float32)
    out[40:80, 60:110] = rng.integers(0, 65535, (40, 50, 3), dtype=np.uint16)
    out[110:115, 5:30] = 65535  # a label drawn outside the matte

    def to_pass(raw: np.ndarray) -> np.ndarray:
        return (raw.astype(np.float32) / 65535.0) ** 2.2

    got = sequence_pass_pixels(plate, out, matte, (0, 1, 2), to_pass)
    whole = face_layer(to_pass(out), to_pass(plate), matte)
    assert np.array_equal(got["face"][..., :3], whole) and np.array_equal(got["face"][..., 3], matte)
    assert np.abs(got["face"][110:115, 5:30, :3]).min() > 0  # the label is in the face pass
    assert not got["face"][:30, 120:, :3].any()  # untouched: exactly 0
    untouched = sequence_pass_pixels(plate, plate, np.zeros_like(matte), (0, 1, 2), to_pass)
    assert not untouched["face"].any() and not untouched["matte"].any()
