"""A flaky object store for the tests: an HTTP proxy on loopback in front of the tests' S3 server that
fails some of the requests it passes on, the ways a real store fails.

- ``slowdown``: answers ``503 SlowDown`` with S3's XML error body (the request never reaches the store);
- ``reset``: the connection is reset mid-body: a download after half its body, an upload after half of
  its body has been read (it never reaches the store), an answer without a body before it is sent;
- ``stall``: the answer stops (a download after half its body) for ``stall_seconds``, past the client's
  read timeout, then the connection is closed.

``rate`` is the share of requests failed (a seeded ``random.Random``: the same requests fail run after
run); ``key`` limits the faults to requests whose path holds that key.  :attr:`FlakyS3.injected` counts
what was done, by kind.  Start it with :meth:`FlakyS3.start` (or use it as a context manager) and point
``AWS_ENDPOINT_URL`` at :attr:`FlakyS3.endpoint`.
"""

from __future__ import annotations

import http.client
import random
import socket
import struct
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Self
from urllib.parse import urlsplit

KINDS = ("slowdown", "reset", "stall")
_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "proxy-connection", "upgrade", "te"}


@dataclass
class Faults:
    """What the proxy injects: ``rate`` of the requests (0-1), of these ``kinds``, only for paths holding ``key``."""

    rate: float = 0.0
    kinds: tuple[str, ...] = KINDS
    key: str | None = None
    stall_seconds: float = 3.0
    seed: int = 32
    methods: tuple[str, ...] = ()
    """Only these HTTP methods (empty: every method)."""
    rng: random.Random = field(init=False)

    def __post_init__(self) -> None:
        unknown = set(self.kinds) - set(KINDS)
        if unknown:
            raise ValueError(f"unknown fault kinds {sorted(unknown)}")
        self.rng = random.Random(self.seed)


def slowdown_body(path: str) -> bytes:
    """S3's answer to a client that should slow down."""
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        "<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message>"
        f"<Resource>{path}</Resource><RequestId>{uuid.uuid4().hex[:16]}</RequestId></Error>"
    ).encode()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            out = bytearray()
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return bytes(out)
                out += self.rfile.read(size)
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _reset(self) -> None:
        """Close the connection with a TCP reset (SO_LINGER 0), as a dropped connection looks."""
        self.close_connection = True
        try:
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()
        except OSError:
            pass

    def _forward(self, body: bytes) -> tuple[int, list[tuple[str, str]], bytes]:
        upstream = http.client.HTTPConnection(
            self.server.upstream_host, self.server.upstream_port, timeout=60
        )
        try:
            headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
            if body or self.command in ("PUT", "POST"):
                headers["Content-Length"] = str(len(body))
            upstream.request(self.command, self.path, body=body or None, headers=headers)
            response = upstream.getresponse()
            data = response.read()
            return response.status, [(k, v) for k, v in response.getheaders()], data
        finally:
            upstream.close()

    def _answer(
        self, status: int, headers: list[tuple[str, str]], data: bytes, upto: int | None = None
    ) -> None:
        self.send_response_only(status)
        for name, value in headers:
            if name.lower() not in _HOP_BY_HOP and name.lower() != "content-length":
                self.send_header(name, value)
        length = next((v for k, v in headers if k.lower() == "content-length"), None)
        self.send_header("Content-Length", length if self.command == "HEAD" and length else str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data if upto is None else data[:upto])
        self.wfile.flush()

    def _handle(self) -> None:
        fault = self.server.draw(self.command, self.path)
        has_body = bool(self.headers.get("Content-Length", "0") not in ("", "0")) or (
            self.headers.get("Transfer-Encoding", "").lower() == "chunked"
        )
        if fault == "reset" and has_body:
            self.rfile.read(max(1, int(self.headers.get("Content-Length") or 2) // 2))
            self._reset()
            return
        body = self._body()
        if fault == "slowdown":
            self._answer(503, [("Content-Type", "application/xml")], slowdown_body(self.path))
            return
        if fault == "stall" and (has_body or self.command == "HEAD"):
            time.sleep(self.server.faults.stall_seconds)
            self._reset()
            return
        status, headers, data = self._forward(body)
        if fault == "reset":
            if len(data) >= 2 and self.command != "HEAD":
                self._answer(status, headers, data, upto=len(data) // 2)
            self._reset()
            return
        if fault == "stall" and len(data) >= 2 and self.command != "HEAD":
            self._answer(status, headers, data, upto=len(data) // 2)
            time.sleep(self.server.faults.stall_seconds)
            self._reset()
            return
        if fault == "stall":
            time.sleep(self.server.faults.stall_seconds)
            self._reset()
            return
        self._answer(status, headers, data)

    do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _handle


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, upstream: str, faults: Faults) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        parts = urlsplit(upstream)
        self.upstream_host = parts.hostname or "127.0.0.1"
        self.upstream_port = parts.port or 80
        self.faults = faults
        self.lock = threading.Lock()
        self.injected: Counter[str] = Counter()
        self.requests = 0

    def draw(self, method: str, path: str) -> str | None:
        """The fault for this request (None: pass it on), counted."""
        faults = self.faults
        with self.lock:
            self.requests += 1
            if faults.rate <= 0 or (faults.key is not None and faults.key not in path):
                return None
            if faults.methods and method not in faults.methods:
                return None
            if faults.rng.random() >= faults.rate:
                return None
            kind = faults.rng.choice(faults.kinds)
            self.injected[kind] += 1
            return kind


class FlakyS3:
    """The proxy in front of ``upstream`` (an S3 endpoint URL); :attr:`faults` may be changed while it runs."""

    def __init__(self, upstream: str, faults: Faults | None = None) -> None:
        self._server = _Server(upstream, faults or Faults())
        self._thread = threading.Thread(target=self._server.serve_forever, name="flaky-s3", daemon=True)

    @property
    def endpoint(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def faults(self) -> Faults:
        return self._server.faults

    @faults.setter
    def faults(self, faults: Faults) -> None:
        with self._server.lock:
            self._server.faults = faults

    @property
    def injected(self) -> Counter[str]:
        """Faults injected so far, by kind."""
        with self._server.lock:
            return Counter(self._server.injected)

    @property
    def requests(self) -> int:
        """Requests received so far (failed or passed on)."""
        with self._server.lock:
            return self._server.requests

    def reset_counts(self) -> None:
        with self._server.lock:
            self._server.injected.clear()
            self._server.requests = 0

    def start(self) -> FlakyS3:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
