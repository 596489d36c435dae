"""Open a local HTML file in headless Chromium and report what a viewer would see.

Talks the Chrome DevTools protocol over ``--remote-debugging-pipe`` (JSON
messages separated by NUL bytes on file descriptors 3 and 4 of the browser):
no port to pick, no websocket client to install, and nothing else on the
machine can attach.  The page is opened only after the console and log
domains are enabled, so errors raised while it loads are not missed; they
include script errors, ``console.error`` calls, resources that failed to load
and Content-Security-Policy violations (Chromium logs these as ``Log`` entries
with level ``error``).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "chrome")

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--remote-debugging-pipe",
)

# Evaluated in the page: every <img> with whether it was decoded and displayed.
IMAGES_JS = """JSON.stringify(Array.from(document.images).map(i => ({
  src: i.src.slice(0, 40), complete: i.complete, naturalWidth: i.naturalWidth,
  naturalHeight: i.naturalHeight, width: i.getBoundingClientRect().width,
  height: i.getBoundingClientRect().height})))"""


def find_chromium() -> str | None:
    """Path of a Chromium/Chrome binary, or None."""
    for name in CHROMIUM_NAMES:
        path = shutil.which(name)
        if path:
            return path
    return None


@dataclass
class PageCheck:
    """What loading a page produced."""

    title: str
    errors: list[str] = field(default_factory=list)
    """Console errors, uncaught exceptions, failed loads, CSP violations."""
    images: list[dict[str, Any]] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    """URLs the page asked for besides itself (data: URIs excluded)."""
    probe: Any = None
    """What the ``probe`` expression returned (it must return a JSON string)."""
    downloads: list[Path] = field(default_factory=list)
    """The files the page downloaded (with ``check_page(downloads=...)``)."""


class _Pipe:
    """One CDP connection over the browser's debugging pipe."""

    def __init__(self, to_browser: int, from_browser: int) -> None:
        self.to_browser = to_browser
        self.from_browser = from_browser
        self.buffer = b""
        self.next_id = 0
        self.events: list[dict[str, Any]] = []

    def send(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        session: str | None = None,
        timeout: float = 30.0,
    ) -> dict[str, Any]:
        self.next_id += 1
        message: dict[str, Any] = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self.to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            reply = self._read(deadline)
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"CDP {method} failed: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_event(self, method: str, timeout: float) -> dict[str, Any]:
        for i, event in enumerate(self.events):
            if event.get("method") == method:
                return self.events.pop(i)
        deadline = time.monotonic() + timeout
        while True:
            event = self._read(deadline)
            if event.get("method") == method:
                return event
            self.events.append(event)

    def _read(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no answer from Chromium over the debugging pipe")
            ready, _, _ = select.select([self.from_browser], [], [], left)
            if ready:
                chunk = os.read(self.from_browser, 1 << 20)
                if not chunk:
                    raise RuntimeError("Chromium closed the debugging pipe")
                self.buffer += chunk
        raw, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(raw)


def check_page(
    path: str | Path,
    *,
    chromium: str | None = None,
    timeout: float = 45.0,
    probe: str | None = None,
    downloads: Path | None = None,
) -> PageCheck:
    """Load ``path`` in headless Chromium; return its title, errors, images and outside requests.

    ``probe``: a JavaScript expression evaluated in the loaded page that returns a JSON string;
    its parsed value is ``PageCheck.probe``.  ``downloads``: a folder where the page's downloads are
    saved (what the probe triggers is waited for, up to ``timeout``: ``PageCheck.downloads``).
    """
    binary = chromium or find_chromium()
    if binary is None:
        raise FileNotFoundError("no Chromium binary found on PATH")
    url = Path(path).resolve().as_uri()
    profile = tempfile.mkdtemp(prefix="recast-chromium-")
    cmd_read, cmd_write = os.pipe()  # we write commands, the browser reads them on fd 3
    out_read, out_write = os.pipe()  # the browser writes on fd 4, we read

    def child_fds() -> None:
        # Move both ends above 4 first: the pipes themselves may have been given fds 3 or 4.
        high_in = fcntl.fcntl(cmd_read, fcntl.F_DUPFD, 10)
        high_out = fcntl.fcntl(out_write, fcntl.F_DUPFD, 10)
        os.dup2(high_in, 3)
        os.dup2(high_out, 4)

    process = subprocess.Popen(
        [binary, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE if os.environ.get("RECAST_CHROMIUM_QUIET", "1") == "1" else None,
        preexec_fn=child_fds,  # noqa: PLW1509 - only dup2 before exec
        # Python's own fds are non-inheritable (PEP 446), so only the dup2'd 3 and 4 reach the
        # browser; close_fds=True would close them again after preexec_fn.
        close_fds=False,
        start_new_session=True,
    )
    os.close(cmd_read)
    os.close(out_write)
    cdp = _Pipe(cmd_write, out_read)
    try:
        if downloads is not None:
            behaviour = {"behavior": "allow", "downloadPath": str(downloads.resolve()), "eventsEnabled": True}
            cdp.send("Browser.setDownloadBehavior", behaviour)
        check = _inspect(cdp, url, timeout, probe)
        if downloads is not None:
            check.downloads = _downloaded(cdp, downloads, timeout)
        return check
    finally:
        with contextlib.suppress(Exception):
            cdp.send("Browser.close", timeout=5)
        os.close(cmd_write)
        os.close(out_read)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, 9)
            process.wait(timeout=10)
        if process.stderr is not None:
            process.stderr.close()
        shutil.rmtree(profile, ignore_errors=True)


def _downloaded(cdp: _Pipe, folder: Path, timeout: float) -> list[Path]:
    """The files saved in ``folder`` once every download the page began has completed (or failed)."""
    begun: set[str] = set()
    done: set[str] = set()
    deadline = time.monotonic() + timeout
    while True:
        for event in [e for e in cdp.events if e.get("method", "").startswith("Browser.download")]:
            cdp.events.remove(event)
            params = event.get("params", {})
            if event["method"] == "Browser.downloadWillBegin":
                begun.add(params["guid"])
            elif params.get("state") in ("completed", "canceled"):
                done.add(params["guid"])
        if begun and begun <= done:
            return sorted(p for p in folder.iterdir() if p.is_file())
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"downloads not finished: {len(begun - done)} of {len(begun)}")
        with contextlib.suppress(TimeoutError):
            cdp.events.append(cdp._read(time.monotonic() + min(left, 1.0)))


def _inspect(cdp: _Pipe, url: str, timeout: float, probe: str | None = None) -> PageCheck:
    target = cdp.send("Target.createTarget", {"url": "about:blank"}, timeout=timeout)["targetId"]
    session = cdp.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
    for domain in ("Page", "Runtime", "Log", "Network"):
        cdp.send(f"{domain}.enable", session=session)
    cdp.events.clear()
    cdp.send("Page.navigate", {"url": url}, session=session)
    cdp.wait_event("Page.loadEventFired", timeout)
    images = json.loads(
        cdp.send("Runtime.evaluate", {"expression": IMAGES_JS, "returnByValue": True}, session=session)[
            "result"
        ]["value"]
    )
    title = cdp.send(
        "Runtime.evaluate", {"expression": "document.title", "returnByValue": True}, session=session
    )["result"]["value"]
    # Log entries arrive asynchronously: one more round trip flushes those already queued.
    cdp.send("Runtime.evaluate", {"expression": "1"}, session=session)
    check = PageCheck(title=title, images=images)
    if probe is not None:
        value = cdp.send("Runtime.evaluate", {"expression": probe, "returnByValue": True}, session=session)
        check.probe = json.loads(value["result"]["value"])
    for event in cdp.events:
        method, params = event.get("method"), event.get("params", {})
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            check.errors.append(
                "console: "
                + " ".join(str(a.get("value", a.get("description"))) for a in params.get("args", []))
            )
        elif method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            check.errors.append(
                f"exception: {details.get('text')} {details.get('exception', {}).get('description', '')}"
            )
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            entry = params["entry"]
            check.errors.append(f"log[{entry.get('source')}]: {entry.get('text')} {entry.get('url', '')}")
        elif method == "Network.loadingFailed":
            check.errors.append(f"load failed: {params.get('errorText')} {params.get('blockedReason', '')}")
        elif method == "Network.requestWillBeSent":
            req_url = params.get("request", {}).get("url", "")
            if req_url != url and not req_url.startswith("data:"):
                check.requests.append(req_url)
    return check
