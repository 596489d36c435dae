"""LoRA adapter files (ONNX Runtime adapter format), their bounded cache and per-run activation.

An adapter file holds A/B tensors for the slots of one prepared model.  Its model
version is a 31-bit fingerprint of the base model's sha256 (the format stores an
``int32``; an extra parameter carrying the full hash is rejected by ONNX Runtime
at run time), and every parameter name and shape is checked against the slot
record, so an adapter made for another base model is refused before rendering.
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnxruntime as ort

from pipeline.errors import InputRefused, ModelPackError
from pipeline.lora.prepare import LoraSlots
from pipeline.store import storage
from pipeline.store.hashing import sha256_file

log = logging.getLogger(__name__)

ADAPTER_SUFFIX = ".onnx_adapter"


def model_version_for(base_sha256: str) -> int:
    """The adapter-format model version standing for a base model: 31 bits of its sha256."""
    try:
        return int(base_sha256[:8], 16) & 0x7FFFFFFF
    except ValueError as exc:
        raise ModelPackError("lora.base_sha256", f"not a hex sha256: {base_sha256!r}") from exc


def _check_parameters(
    where: str, slots: LoraSlots, shapes: Mapping[str, tuple[int, ...]], dtypes: Mapping[str, str]
) -> None:
    expected = slots.parameter_shapes()
    unknown = sorted(set(shapes) - set(expected))
    if unknown:
        raise ModelPackError(where, f"adapter sets tensors the model has no LoRA slot for: {unknown[:5]}")
    if not shapes:
        raise ModelPackError(where, "adapter holds no parameters")
    for name, shape in shapes.items():
        if tuple(shape) != tuple(expected[name]):
            raise ModelPackError(
                where,
                f"adapter tensor {name} has shape {list(shape)}, the model's slot is {list(expected[name])}",
            )
        if dtypes[name] not in ("tensor(float)", "tensor(float16)"):
            raise ModelPackError(where, f"adapter tensor {name} has type {dtypes[name]}")


def write_adapter(
    url: str, slots: LoraSlots, params: Mapping[str, np.ndarray], *, adapter_version: int = 1
) -> str:
    """Write an adapter for the model described by ``slots`` to ``url``; returns its sha256.

    ``params`` maps slot A/B names to arrays (float32 unless the model is float16).
    Missing slots stay zero at run time (an adapter may cover a subset).
    """
    arrays = {name: np.ascontiguousarray(value) for name, value in params.items()}
    _check_parameters(
        url,
        slots,
        {k: v.shape for k, v in arrays.items()},
        {
            k: "tensor(float16)"
            if v.dtype == np.float16
            else "tensor(float)"
            if v.dtype == np.float32
            else str(v.dtype)
            for k, v in arrays.items()
        },
    )
    fmt = ort.AdapterFormat()
    fmt.set_adapter_version(adapter_version)
    fmt.set_model_version(model_version_for(slots.base_sha256))
    fmt.set_parameters({k: ort.OrtValue.ortvalue_from_numpy(v) for k, v in arrays.items()})
    with tempfile.TemporaryDirectory(prefix="recast-adapter-") as tmp:
        path = os.path.join(tmp, "adapter" + ADAPTER_SUFFIX)
        fmt.export_adapter(path)
        digest = sha256_file(path)
        storage.publish_file(path, url)
    log.info("wrote adapter %s (%d tensors, sha256 %s)", url, len(arrays), digest[:12])
    return digest


def read_adapter_parameters(path: str) -> dict[str, np.ndarray]:
    """The A/B arrays stored in a local adapter file (copies)."""
    fmt = ort.AdapterFormat.read_adapter(path)
    return {k: np.array(v.numpy()) for k, v in fmt.get_parameters().items()}


@dataclass(frozen=True, eq=False)
class LoadedAdapter:
    """An adapter verified against its base model and memory-mapped by ONNX Runtime."""

    url: str
    sha256: str
    nbytes: int
    path: str
    adapter: Any  # onnxruntime.LoraAdapter


def load_adapter(
    path: str, slots: LoraSlots, *, url: str | None = None, sha256: str | None = None
) -> LoadedAdapter:
    """Verify the local adapter file ``path`` against ``slots`` and load it.

    ModelPackError (naming ``url``) if the file is not an adapter, was made for another
    base model, or its tensors do not fit the model's slots.
    """
    where = url or path
    try:
        fmt = ort.AdapterFormat.read_adapter(path)
    except Exception as exc:  # ORT raises plain RuntimeError for a bad file
        raise ModelPackError(where, f"not an ONNX Runtime adapter file ({exc})") from exc
    expected = model_version_for(slots.base_sha256)
    if fmt.get_model_version() != expected:
        raise ModelPackError(
            where,
            f"adapter was made for another base model (model version {fmt.get_model_version()}, "
            f"this model's is {expected} from base sha256 {slots.base_sha256[:12]}...)",
        )
    params = fmt.get_parameters()
    _check_parameters(
        where,
        slots,
        {k: tuple(v.shape()) for k, v in params.items()},
        {k: v.data_type() for k, v in params.items()},
    )
    del params, fmt
    adapter = ort.LoraAdapter()
    adapter.Load(path)
    if sha256 is None:
        sha256 = sha256_file(path)
    return LoadedAdapter(url=where, sha256=sha256, nbytes=os.path.getsize(path), path=path, adapter=adapter)


def activate(run_options: ort.RunOptions, adapter: LoadedAdapter | None) -> ort.RunOptions:
    """Make ``adapter`` active for runs with ``run_options`` (no-op for None); returns them."""
    if adapter is not None:
        run_options.add_active_adapter(adapter.adapter)
    return run_options


def run(
    session: ort.InferenceSession, feeds: Mapping[str, np.ndarray], adapter: LoadedAdapter | None = None
) -> list[np.ndarray]:
    """``session.run`` with ``adapter`` active for this call only (base model for None)."""
    options = activate(ort.RunOptions(), adapter) if adapter is not None else None
    return session.run(None, dict(feeds), options)


def split_by_adapter(
    adapters: Sequence[LoadedAdapter | None],
) -> list[tuple[LoadedAdapter | None, list[int]]]:
    """Indices of a batch grouped by adapter, in first-seen order.

    One ONNX Runtime run applies one set of adapters to the whole batch, so a batch
    mixing identities with different adapters (or none) is run once per group.
    """
    groups: dict[int, tuple[LoadedAdapter | None, list[int]]] = {}
    for i, adapter in enumerate(adapters):
        groups.setdefault(id(adapter) if adapter is not None else 0, (adapter, []))[1].append(i)
    return list(groups.values())


def verify_adapter(url: str, sha256: str, slots: LoraSlots) -> int:
    """Fetch the adapter at ``url`` and check it (checksum, base model, slot shapes); returns its size.

    For drivers that must refuse a bad adapter before any rendering starts; keeps nothing.
    """
    with tempfile.TemporaryDirectory(prefix="recast-adapter-check-") as tmp:
        cache = AdapterCache(
            slots, tmp, max_count=1
        )  # the actors' bound: what they would refuse is refused now
        loaded = cache.get(url, sha256)
        size = loaded.nbytes
        cache.clear()
    return size


class AdapterCache:
    """Adapters fetched once from URLs, verified, and kept LRU within a count AND a byte bound.

    Keyed by content sha256, so two URLs of the same file share one entry.  Files
    live in ``cache_dir`` (ONNX Runtime memory-maps them; default a fresh temporary
    folder, one per cache) and are deleted on eviction.  Never holds more than ``max_count`` adapters or ``max_bytes`` bytes;
    an adapter larger than ``max_bytes`` on its own is refused.
    """

    def __init__(
        self, slots: LoraSlots, cache_dir: str | None = None, *, max_count: int = 16, max_bytes: int = 1 << 30
    ) -> None:
        if max_count < 1 or max_bytes < 1:
            raise ValueError(f"max_count and max_bytes must be positive, got {max_count}, {max_bytes}")
        self.slots = slots
        # A folder per cache by default: caches sharing one would delete each other's files.
        self.cache_dir = cache_dir or tempfile.mkdtemp(prefix="recast-adapters-")
        self.max_count = max_count
        self.max_bytes = max_bytes
        self._entries: OrderedDict[str, LoadedAdapter] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0
        os.makedirs(self.cache_dir, exist_ok=True)

    @property
    def count(self) -> int:
        return len(self._entries)

    @property
    def nbytes(self) -> int:
        return sum(e.nbytes for e in self._entries.values())

    def __contains__(self, sha256: str) -> bool:
        return sha256 in self._entries

    def get(self, url: str, sha256: str) -> LoadedAdapter:
        """The adapter at ``url``; fetched, checked against ``sha256`` and loaded on a miss."""
        sha256 = sha256.lower()
        with self._lock:
            hit = self._entries.get(sha256)
            if hit is not None:
                self._entries.move_to_end(sha256)
                self.hits += 1
                return hit
        try:
            data = storage.read_bytes(url, max_bytes=self.max_bytes)
        except InputRefused as exc:
            if exc.reason.startswith("larger than"):  # reading stopped one byte past the bound
                raise ModelPackError(
                    url, f"adapter is more than the cache bound {self.max_bytes} bytes"
                ) from None
            raise
        actual = hashlib.sha256(data).hexdigest()
        if actual != sha256:
            raise ModelPackError(url, f"adapter checksum mismatch: expected sha256 {sha256}, got {actual}")
        if len(data) > self.max_bytes:
            raise ModelPackError(
                url, f"adapter is {len(data)} bytes, more than the cache bound {self.max_bytes}"
            )
        path = os.path.join(self.cache_dir, sha256 + ADAPTER_SUFFIX)
        storage.write_bytes(path, data)
        try:
            loaded = load_adapter(path, self.slots, url=url, sha256=sha256)
        except BaseException:
            os.remove(path)
            raise
        with self._lock:
            self.misses += 1
            if sha256 in self._entries:  # another thread loaded it meanwhile
                self._entries.move_to_end(sha256)
                return self._entries[sha256]
            # Evict before inserting so the bound holds at every instant.
            while self._entries and (
                len(self._entries) + 1 > self.max_count or self.nbytes + loaded.nbytes > self.max_bytes
            ):
                self._evict_oldest()
            self._entries[sha256] = loaded
        log.info(
            "cached adapter %s (%d bytes; %d held, %d bytes)", url, loaded.nbytes, self.count, self.nbytes
        )
        return loaded

    def _evict_oldest(self) -> None:
        _, old = self._entries.popitem(last=False)
        # A run still holding `old` keeps its mapping alive; unlinking the file is safe on POSIX.
        try:
            os.remove(old.path)
        except FileNotFoundError:
            pass
        log.info("evicted adapter %s (%d bytes)", old.url, old.nbytes)

    def clear(self) -> None:
        with self._lock:
            while self._entries:
                self._evict_oldest()
