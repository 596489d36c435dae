"""A camera-log plate the generators do not make: ARRI LogC4 DPX, written here with the studio config."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import OpenImageIO as oiio
import PyOpenColorIO as ocio

from pipeline.plates.colour import PlateConverter
from pipeline.plates.frames import merge_back, read_plates, write_plate
from pipeline.plates.probe import probe_sequence
from pipeline.video.sequence_types import ColourRequest

STUDIO = "ocio://studio-config-latest"
SRGB = "sRGB Encoded Rec.709 (sRGB)"


def test_logc4_dpx_reads_in_model_space_and_round_trips(tmp_path) -> None:
    from skimage.data import astronaut

    srgb = np.ascontiguousarray(astronaut()[:256, 128:384] / 255.0, dtype=np.float32)  # 256 x 256
    logc = srgb.copy()
    config = ocio.Config.CreateFromFile(STUDIO)
    config.getProcessor(SRGB, "ARRI LogC4").getDefaultCPUProcessor().applyRGB(logc)
    # 10-bit codes, expanded to 16 bits the way OIIO reads them (bit replication)
    codes = np.clip(np.rint(logc * 1023), 0, 1023).astype(np.uint16) * 64
    codes = codes | (codes >> 10)
    for number in (1, 2):
        spec = oiio.ImageSpec(256, 256, 3, oiio.UINT16)
        spec.attribute("oiio:BitsPerSample", 10)
        out = oiio.ImageOutput.create("dpx")
        path = str(tmp_path / f"a017_c004.{number:07d}.dpx")
        assert out.open(path, spec) and out.write_image(codes), out.geterror()
        out.close()
    info = probe_sequence(
        str(tmp_path / "a017_c004.#######.dpx"),
        fps=Fraction(24000, 1001),
        colour=ColourRequest(config=STUDIO, plate_space="ARRI LogC4"),
    )
    assert info.sequence is not None and info.sequence.bits == 10 and info.pts == (1, 2)
    converter = PlateConverter(info.sequence.colour, info.sequence)
    frame = next(read_plates(info, 0, 1, converter))
    # The models see the picture as it was made (10-bit log quantisation aside).
    assert np.abs(frame.rgb / 65535.0 - srgb).mean() < 0.01
    # Nothing changed: the plate's codes come back exactly; a change stays inside its region.
    assert np.array_equal(merge_back(frame, frame.rgb, converter), frame.pixels)
    rendered = frame.rgb.copy()
    rendered[100:140, 100:140] //= 2
    merged = merge_back(frame, rendered, converter)
    changed = np.any(merged != frame.pixels, axis=-1)
    assert changed[100:140, 100:140].mean() > 0.9 and not changed.sum() - changed[100:140, 100:140].sum()
    target = str(tmp_path / "out.0000001.dpx")
    write_plate(target, merged, frame.spec)
    back = oiio.ImageInput.open(target)
    assert back.spec().get_int_attribute("oiio:BitsPerSample") == 10
    assert np.array_equal(back.read_image(0, 0, 0, 3, oiio.UINT16), merged)
    back.close()
