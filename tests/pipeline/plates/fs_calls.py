"""Count what a listing or probe asks of its filesystem: every public method called on it."""

from __future__ import annotations

from pipeline.store import storage


class CountingFS:
    """Wraps an fsspec filesystem and records every method called on it."""

    def __init__(self, fs, calls):
        self._fs, self._calls = fs, calls

    def __getattr__(self, name):
        attr = getattr(self._fs, name)
        if callable(attr) and not name.startswith("_"):

            def wrapped(*args, **kwargs):
                self._calls.append(name)
                return attr(*args, **kwargs)

            return wrapped
        return attr


def counting(monkeypatch):
    calls: list[str] = []
    real = storage.filesystem
    monkeypatch.setattr(storage, "filesystem", lambda url: (CountingFS(real(url)[0], calls), real(url)[1]))
    return calls
