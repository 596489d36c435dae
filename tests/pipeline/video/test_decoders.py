"""decode.backend: which decoder reads a source, why NVDEC does not, and what auto says when it falls back.

Runs anywhere: on a machine without PyNvVideoCodec or CUDA, ``auto`` must decode
exactly what PyAV decodes and say why; ``nvdec`` must refuse, naming the field.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import sys
from fractions import Fraction

import numpy as np
import pytest
import torch

from pipeline.errors import SpecError
from pipeline.plates.probe import probe_sequence
from pipeline.video.decode import decode_range
from pipeline.video.decoders import (
    DecodeConfig,
    VideoDecoder,
    check_decode_spec,
    fallback_warning,
    nvdec_runtime_problem,
    nvdec_source_problem,
    source_warnings,
)
from pipeline.video.probe import probe
from tests.plates import write_sequence

NOT_INSTALLED = "the PyNvVideoCodec package is not installed (pip install 'recast[gpu]')"
needs_no_package = pytest.mark.skipif(
    importlib.util.find_spec("PyNvVideoCodec") is not None, reason="PyNvVideoCodec is installed here"
)
needs_no_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA device is present")


@pytest.fixture
def stand_in_package(tmp_path, monkeypatch):
    """An importable ``PyNvVideoCodec`` (an empty package on sys.path): the package check passes,
    so the next reason (CUDA) is the one reported."""
    package = tmp_path / "site" / "PyNvVideoCodec"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    importlib.invalidate_caches()
    yield
    sys.modules.pop("PyNvVideoCodec", None)


def test_config_is_typed_and_rejects_unknown_backends() -> None:
    assert DecodeConfig().backend == "auto"
    with pytest.raises(ValueError, match="backend"):
        DecodeConfig(backend="cuvid")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="extra"):
        DecodeConfig(threads=2)  # type: ignore[call-arg]


@needs_no_package
def test_runtime_reason_package_missing() -> None:
    assert nvdec_runtime_problem() == NOT_INSTALLED


@needs_no_cuda
def test_runtime_reason_no_cuda(stand_in_package) -> None:
    assert nvdec_runtime_problem() == "no CUDA device (torch.cuda.is_available() is False)"


def test_source_reasons(clips, tmp_path) -> None:
    h264 = probe(clips.path("cfr_bframes"))
    hevc10 = probe(clips.path("ten_bit_hevc"))
    assert nvdec_source_problem(h264) is None and nvdec_source_problem(hevc10) is None
    prores = probe(clips.path("ten_bit_prores"))
    assert nvdec_source_problem(prores) == (
        "NVDEC does not decode prores (it decodes h264, hevc, av1, vp9, mpeg2video)"
    )
    assert nvdec_source_problem(probe(clips.path("odd_size"))) == (
        "pixel format yuv444p: the NVDEC path handles 8/10-bit 4:2:0 (yuv420p, yuvj420p, yuv420p10le)"
    )
    plates = probe_sequence(write_sequence(tmp_path, "s", count=2), fps=Fraction(24))
    assert nvdec_source_problem(plates) == "image sequences are read with OpenImageIO, not a video decoder"
    deep_h264 = dataclasses.replace(h264, pix_fmt="yuv420p10le", bit_depth=10)
    assert nvdec_source_problem(deep_h264) == "NVDEC decodes 8-bit H.264 only"
    odd = dataclasses.replace(h264, width=161)
    assert nvdec_source_problem(odd) == "odd frame size 161x120 (4:2:0 NVDEC output needs even sides)"
    huge = dataclasses.replace(h264, width=4352, height=2304)
    assert nvdec_source_problem(huge) == "4352x2304 exceeds NVDEC's 4096 px limit for h264"
    assert nvdec_source_problem(dataclasses.replace(hevc10, width=4352, height=2304)) is None


@needs_no_package
def test_auto_falls_back_to_pyav_with_the_reason_and_identical_frames(clips) -> None:
    decoder = VideoDecoder(DecodeConfig())
    assert decoder.warnings == [f"NVDEC unavailable: {NOT_INSTALLED}; decoding with PyAV"]
    assert not decoder.nvdec_ready
    for name in ("cfr_bframes", "ten_bit_hevc"):
        info = probe(clips.path(name))
        assert decoder.backend_for(info) == "pyav"
        got = list(decoder.frames(info.url, info, 5, 17, threads=1))
        want = list(decode_range(info.url, info, 5, 17, threads=1))
        assert [(f.index, f.pts) for f in got] == [(f.index, f.pts) for f in want]
        assert all(np.array_equal(a.rgb, b.rgb) and a.rgb.dtype == b.rgb.dtype for a, b in zip(got, want))


def test_pyav_backend_never_looks_for_nvdec() -> None:
    decoder = VideoDecoder(DecodeConfig(backend="pyav"))
    assert decoder.warnings == [] and decoder.runtime_problem is None and not decoder.nvdec_ready


@needs_no_package
def test_explicit_nvdec_without_the_package_is_a_spec_error() -> None:
    with pytest.raises(SpecError) as caught:
        VideoDecoder(DecodeConfig(backend="nvdec"))
    assert caught.value.field == "decode.backend"
    assert str(caught.value) == f"decode.backend: nvdec requested but unavailable: {NOT_INSTALLED}"


@needs_no_cuda
def test_explicit_nvdec_without_cuda_is_a_spec_error(stand_in_package) -> None:
    with pytest.raises(SpecError, match=r"^decode.backend: nvdec requested but unavailable: no CUDA device"):
        VideoDecoder(DecodeConfig(backend="nvdec"))


def test_spec_checks_before_ray(clips, tmp_path) -> None:
    h264 = ("a", probe(clips.path("cfr_bframes")))
    prores = ("b", probe(clips.path("ten_bit_prores")))
    plates = ("c", probe_sequence(write_sequence(tmp_path, "s", count=2), fps=Fraction(24)))
    nvdec = DecodeConfig(backend="nvdec")
    check_decode_spec(nvdec, None, [h264, plates])  # GPU actors decided on the cluster: the actors check
    check_decode_spec(DecodeConfig(), 0, [h264, prores])  # auto and pyav: never an error
    with pytest.raises(SpecError, match="nvdec needs GPU actors, but resources.gpus_per_actor is 0"):
        check_decode_spec(nvdec, 0, [h264])
    with pytest.raises(SpecError) as caught:
        check_decode_spec(nvdec, 1, [h264, prores])
    assert caught.value.field == "decode.backend"
    assert "nvdec cannot decode shot b: NVDEC does not decode prores" in str(caught.value)


def test_per_shot_warnings_only_where_actors_have_nvdec(clips, tmp_path) -> None:
    plates = probe_sequence(write_sequence(tmp_path, "s", count=2), fps=Fraction(24))
    shots = [
        ("a", probe(clips.path("cfr_bframes"))),
        ("b", probe(clips.path("ten_bit_prores"))),
        ("c", plates),
    ]
    assert source_warnings(DecodeConfig(), False, shots) == []  # the actors' own warning covers it
    assert source_warnings(DecodeConfig(backend="pyav"), True, shots) == []
    assert source_warnings(DecodeConfig(), True, shots) == [
        fallback_warning("shot b: NVDEC does not decode prores (it decodes h264, hevc, av1, vp9, mpeg2video)")
    ]
