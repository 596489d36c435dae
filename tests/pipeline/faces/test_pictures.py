"""Identity pictures: bounded by file size and by decoded pixels (from the header, before decoding),
refused by type, and not kept whole by render actors (only the swapper's prepared source)."""

from __future__ import annotations

import os
import struct
import zlib
from pathlib import Path

import cv2
import numpy as np
import pytest

from pipeline.errors import InputRefused, StorageError
from pipeline.faces.analyze import FaceAnalyzer
from pipeline.faces.config import FaceConfig, IdentitySource
from pipeline.faces.identity import identity_from_images, prepared_for, with_adapter
from pipeline.faces.pictures import header_size, load_picture
from pipeline.faces.renderers.cpu import FaceRenderer
from pipeline.geometry.types import FaceTask
from pipeline.limits import InputLimits
from tests.faces_data import astronaut


def png_header_only(path: Path, width: int, height: int) -> None:
    """A PNG whose header declares ``width`` x ``height`` RGB and whose pixel data is a few bytes:
    the shape of a decompression bomb (decoding would allocate width*height*3 bytes)."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    path.write_bytes(
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", ihdr)
        + chunk(b"IDAT", zlib.compress(b"\0" * 64))
        + chunk(b"IEND", b"")
    )


def test_huge_header_is_refused_before_decoding(tmp_path: Path) -> None:
    bomb = tmp_path / "hero.png"
    png_header_only(bomb, 10_000, 8_000)  # 80 MP declared, 100 bytes on disk
    assert header_size(bomb.read_bytes()) == (10_000, 8_000)
    with pytest.raises(InputRefused) as err:
        load_picture(str(bomb))
    assert err.value.url == str(bomb)
    assert "10000x8000" in err.value.reason and "limits.max_image_pixels 50,000,000" in err.value.reason
    # Past Pillow's own ceiling too (400 MP): refused from the header, never decoded.
    png_header_only(bomb, 20_000, 20_000)
    with pytest.raises(InputRefused, match="limits.max_image_pixels"):
        load_picture(str(bomb), InputLimits(max_image_pixels=150_000_000))


def test_pixel_and_byte_limits_are_configurable(tmp_path: Path) -> None:
    path = tmp_path / "astro.jpg"
    cv2.imwrite(str(path), cv2.cvtColor(astronaut(), cv2.COLOR_RGB2BGR))
    assert load_picture(str(path)).shape == (512, 512, 3)
    with pytest.raises(InputRefused, match=r"512x512 \(262,144 pixels\), more than limits.max_image_pixels"):
        load_picture(str(path), InputLimits(max_image_pixels=512 * 511))
    with pytest.raises(InputRefused, match="larger than 1000 bytes"):
        load_picture(str(path), InputLimits(max_image_bytes=1000))


@pytest.mark.timeout(30)
def test_text_file_fifo_and_device_are_not_pictures(tmp_path: Path) -> None:
    text = tmp_path / "hero.jpg"
    text.write_text("not a picture, a shot list\n" * 10)
    with pytest.raises(StorageError, match="not a readable image"):
        load_picture(str(text))
    fifo = tmp_path / "fifo.jpg"
    os.mkfifo(fifo)
    with pytest.raises(InputRefused, match="is a FIFO"):
        load_picture(str(fifo))
    with pytest.raises(InputRefused, match="is a character device"):
        load_picture("/dev/zero")


def test_prepared_identity_drops_the_picture_and_renders_the_same(default_models) -> None:
    full = identity_from_images("astro", [("astronaut", astronaut())], default_models)
    lean = prepared_for(full, default_models.swapper)
    assert full.source_rgb.shape == (512, 512, 3)
    assert lean.source_rgb.size == 0  # the whole picture is gone ...
    assert (
        isinstance(lean.prepared, np.ndarray) and lean.prepared.shape[0] == default_models.swapper.crop_size
    )
    np.testing.assert_array_equal(lean.embedding, full.embedding)
    # ... and renders are byte-identical to those made from the full picture.
    frame = cv2.flip(astronaut(), 1)
    face = FaceAnalyzer(default_models).analyze([frame])[0][0]
    tasks = [[FaceTask(track_id=0, identity="astro", box=face.box, landmarks=face.landmarks)]]
    with_full = FaceRenderer(default_models, {"astro": full}, FaceConfig()).render([frame], tasks)
    with_lean = FaceRenderer(default_models, {"astro": lean}, FaceConfig()).render([frame], tasks)
    assert not np.array_equal(with_full[0], frame)
    np.testing.assert_array_equal(with_lean[0], with_full[0])
    with pytest.raises(ValueError, match="already prepared"):
        with_adapter(lean, None)


def test_render_actor_keeps_no_full_picture(tmp_path: Path, default_pack) -> None:
    """The actor class in-process: after set-up its identities hold the prepared source only."""
    from actors.render import RenderConfig, RenderWorker

    path = tmp_path / "astro.png"
    cv2.imwrite(str(path), cv2.cvtColor(astronaut(), cv2.COLOR_RGB2BGR))
    config = RenderConfig(
        pack_cache_dir=os.path.dirname(default_pack.local_dir),
        identities={"astro": IdentitySource(images=(str(path),))},
    )
    worker = RenderWorker(config)
    assert worker.setup_error is None, worker.setup_error
    ident = worker.identities["astro"]
    assert ident.source_rgb.size == 0 and ident.prepared is not None
    # The limits travel with the config: a picture over the job's limit fails the actor's set-up too.
    small = RenderWorker(config.model_copy(update={"limits": InputLimits(max_image_pixels=1000)}))
    assert small.setup_error is not None and "max_image_pixels" in str(small.setup_error)
