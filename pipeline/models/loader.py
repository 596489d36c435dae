"""Build the role objects of a verified pack: one runner (session) per model file.

The class of each entry is chosen by its declared ``kind``, never by tensor
shapes.  Classes are imported only for the kinds a pack uses, so a pack of
studio models never imports the embedded pack's modules and vice versa.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pipeline.errors import ModelPackError
from pipeline.lora.prepare import LoraSlots
from pipeline.models.detectors.detector_sizes import DetectorSizes
from pipeline.models.pack import ModelEntry, ModelPack, PackManifest
from pipeline.models.roles import Detector, Enhancer, Occluder, Recognizer, Swapper
from pipeline.models.runtime import make_runner
from pipeline.models.runtime.protocols import Runner
from pipeline.models.runtime.settings import ExecutionConfig

log = logging.getLogger(__name__)

KIND_CLASSES: dict[str, tuple[str, str]] = {
    "scrfd": ("pipeline.models.detectors.scrfd", "ScrfdDetector"),
    "yunet": ("pipeline.models.detectors.yunet", "YunetDetector"),
    "retinaface": ("pipeline.models.detectors.retinaface", "RetinaFaceDetector"),
    "arcface": ("pipeline.models.arcface", "ArcFaceRecognizer"),
    "sface": ("pipeline.models.sface", "SFaceRecognizer"),
    "inswapper": ("pipeline.models.inswapper", "InSwapper"),
    "builtin": ("pipeline.models.builtin_swapper", "BuiltinSwapper"),
    "gfpgan": ("pipeline.models.gfpgan", "GfpganEnhancer"),
    "xseg": ("pipeline.models.xseg", "XsegOccluder"),
}
"""kind -> (module, class); every class is constructed as ``Cls(runner, entry)``."""


@dataclass
class FaceModels:
    """The warm role objects of one pack (built once per actor, never per frame)."""

    detector: Detector
    recognizer: Recognizer
    swapper: Swapper
    enhancer: Enhancer | None
    occluder: Occluder | None
    pack: ModelPack
    providers: dict[str, list[str]] = field(default_factory=dict)
    """role -> providers its session really runs on (``get_providers()``), then any graph
    rewrites made for that session (e.g. ``"winograd F(4x4,3x3) on 9 conv(s)"``)."""
    warnings: list[str] = field(default_factory=list)
    """Fallbacks and install problems, for job stats."""
    lora_slots: LoraSlots | None = None
    """The swapper's LoRA slots (``contract["lora"]``): what identity adapters are checked
    against (``AdapterCache(lora_slots, ...)``, ``verify_adapter``); None = no adapters."""
    detector_sizes: DetectorSizes | None = None
    """The detector at smaller input sizes (``faces.detect_size: auto``); None = its size only."""


def role_class(kind: str) -> Callable[[Runner | None, ModelEntry], Any]:
    """The class that implements ``kind``."""
    try:
        module_name, class_name = KIND_CLASSES[kind]
    except KeyError:
        raise ModelPackError(kind, f"no class implements kind {kind!r}") from None
    return getattr(importlib.import_module(module_name), class_name)


def pack_lora_slots(manifest: PackManifest, where: str) -> LoraSlots | None:
    """The LoRA slots of the pack's swapper (``contract["lora"]``), or None if it has none.

    Needs only the manifest, so a driver can check identity adapters
    (:func:`pipeline.lora.verify_adapter`) before any actor fetches the pack.
    """
    entry = next((e for e in manifest.models if e.role == "swapper"), None)
    if entry is None or "lora" not in entry.contract:
        return None
    if entry.kind != "inswapper":
        raise ModelPackError(
            f"{where} swapper", f"contract.lora is only supported for kind inswapper, not {entry.kind!r}"
        )
    record = entry.contract["lora"]
    at = f"{where} {entry.file} contract.lora"
    if not isinstance(record, dict):
        raise ModelPackError(at, f"must be an object, got {type(record).__name__}")
    return LoraSlots.from_contract(record, at)


def load_face_models(pack: ModelPack, execution: ExecutionConfig) -> FaceModels:
    """Create one runner per model file of ``pack`` and the role object around it."""
    built: dict[str, Any] = {}
    providers: dict[str, list[str]] = {}
    warnings: list[str] = []
    lora_slots = pack_lora_slots(pack.manifest, pack.url)
    for entry in pack.manifest.models:
        runner = (
            make_runner(
                pack.path(entry.role),
                execution,
                overridable_initializers=entry.role == "swapper" and lora_slots is not None,
            )
            if entry.file is not None
            else None
        )
        if runner is not None:
            providers[entry.role] = [*runner.providers, *runner.rewrites]
            warnings.extend(w for w in runner.warnings if w not in warnings)
        built[entry.role] = role_class(entry.kind)(runner, entry)
    for role in ("detector", "recognizer", "swapper"):
        if role not in built:
            raise ModelPackError(pack.url, f"pack has no {role}")
    swapper_entry = pack.entry("swapper")
    recognizer_dim = built["recognizer"].dim
    if swapper_entry is not None and swapper_entry.kind == "inswapper" and recognizer_dim != 512:
        recognizer_entry = pack.entry("recognizer")
        raise ModelPackError(
            pack.url,
            f"swapper inswapper needs 512-d ArcFace embeddings, but recognizer "
            f"{recognizer_entry.kind if recognizer_entry else '?'} gives {recognizer_dim}-d ones",
        )
    detector_entry = pack.entry("detector")
    detector_sizes = (
        DetectorSizes(
            built["detector"],
            role_class(detector_entry.kind),
            detector_entry,
            pack.path("detector"),
            execution,
        )
        if detector_entry is not None and detector_entry.file is not None
        else None
    )
    log.info("face models of pack %s (%s) on %s", pack.manifest.name, pack.hash[:12], providers)
    if lora_slots is not None:
        log.info("swapper has %d LoRA slots of rank %d", len(lora_slots.slots), lora_slots.rank)
    return FaceModels(
        detector=built["detector"],
        recognizer=built["recognizer"],
        swapper=built["swapper"],
        enhancer=built.get("enhancer"),
        occluder=built.get("occluder"),
        pack=pack,
        providers=providers,
        warnings=warnings,
        lora_slots=lora_slots,
        detector_sizes=detector_sizes,
    )


def load_detector(pack: ModelPack, execution: ExecutionConfig) -> Detector:
    """The pack's detector alone (one session), for tools that only look for faces."""
    entry = pack.entry("detector")
    if entry is None:
        raise ModelPackError(pack.url, "pack has no detector")
    runner = make_runner(pack.path("detector"), execution) if entry.file is not None else None
    detector: Detector = role_class(entry.kind)(runner, entry)
    return detector
