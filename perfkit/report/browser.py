"""Headless Chromium over the DevTools pipe: load a page, collect its console
errors, screenshot elements. No Python dependency beyond the standard library.

Protocol (--remote-debugging-pipe): Chromium reads JSON commands from fd 3 and
writes replies and events to fd 4, each message ended by a NUL byte. Commands
carry an id; the reply has the same id; everything else is an event.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfkit.errors import PerfkitError

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")
INSTALL_HINT = ("Chromium or Chrome on PATH (Debian/Ubuntu: apt-get install chromium; or set "
                "PERFKIT_CHROMIUM to the browser's path)")
FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--no-default-browser-check",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-extensions", "--mute-audio", "--hide-scrollbars",
    "--host-resolver-rules=MAP * ~NOTFOUND",  # offline: any network fetch fails, and logs
    "--remote-debugging-pipe",
)
VIEWPORT_W = 860


def find_chromium() -> str | None:
    env = os.environ.get("PERFKIT_CHROMIUM")
    if env:
        return env if shutil.which(env) else None
    return next((p for p in map(shutil.which, CANDIDATES) if p), None)


def _high_fd(fd: int) -> int:
    """Move a pipe end to fd >= 10, so that dup2 onto 3 and 4 in the child never collides."""
    new = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(fd)
    return new


@dataclass
class PageCapture:
    console_errors: list[str]  # console.error, uncaught exceptions, failed loads, ...
    shots: dict[str, bytes] = field(default_factory=dict)  # element id -> PNG


class Chromium:
    """One headless browser; use as a context manager."""

    def __init__(self, exe: str, timeout_s: float = 30.0) -> None:
        self.deadline = time.monotonic() + timeout_s
        self.timeout_s = timeout_s
        self.profile = tempfile.TemporaryDirectory(prefix="perfkit-chromium-",
                                                   ignore_cleanup_errors=True)
        self.log = tempfile.TemporaryFile()  # noqa: SIM115 (closed in close())
        to_child_r, self.to_child = map(_high_fd, os.pipe())
        self.from_child, from_child_w = map(_high_fd, os.pipe())

        def wire() -> None:  # in the child: fd 3 = commands in, fd 4 = replies out
            os.dup2(to_child_r, 3)
            os.dup2(from_child_w, 4)

        try:
            self.proc = subprocess.Popen(
                [exe, *FLAGS, f"--user-data-dir={self.profile.name}", "about:blank"],
                preexec_fn=wire, close_fds=False, stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=self.log)
        except OSError as err:
            for fd in (to_child_r, from_child_w, self.to_child, self.from_child):
                os.close(fd)
            self.log.close()
            self.profile.cleanup()
            raise PerfkitError(f"cannot start {exe}: {err.strerror}") from None
        os.close(to_child_r)
        os.close(from_child_w)
        self.buf = b""
        self.next_id = 0
        self.events: list[dict[str, Any]] = []

    def __enter__(self) -> Chromium:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _fail(self, what: str) -> PerfkitError:
        self.log.seek(0)
        lines = [ln for ln in self.log.read().decode(errors="replace").splitlines()
                 if ln.strip() and "dbus" not in ln]
        tail = f" (browser said: {lines[-1].strip()[:200]})" if lines else ""
        return PerfkitError(f"Chromium {what}{tail}")

    def _read_message(self) -> dict[str, Any]:
        while b"\0" not in self.buf:
            left = self.deadline - time.monotonic()
            if left <= 0 or not select.select([self.from_child], [], [], left)[0]:
                raise self._fail(f"did not answer within {self.timeout_s:g} s")
            chunk = os.read(self.from_child, 1 << 20)
            if not chunk:
                raise self._fail("exited unexpectedly")
            self.buf += chunk
        raw, self.buf = self.buf.split(b"\0", 1)
        message: dict[str, Any] = json.loads(raw)
        return message

    def send(self, method: str, params: dict[str, Any] | None = None,
             session: str | None = None) -> dict[str, Any]:
        """Send one command; return its result (events that arrive meanwhile are kept)."""
        self.next_id += 1
        msg: dict[str, Any] = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        try:
            os.write(self.to_child, json.dumps(msg).encode() + b"\0")
        except BrokenPipeError:
            raise self._fail("exited unexpectedly") from None
        while True:
            reply = self._read_message()
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise self._fail(f"refused {method}: {reply['error'].get('message')}")
                result: dict[str, Any] = reply.get("result", {})
                return result
            self.events.append(reply)

    def wait_event(self, method: str) -> dict[str, Any]:
        seen = len(self.events)
        while True:
            for event in self.events[seen:]:
                if event.get("method") == method:
                    return event
            seen = len(self.events)
            self.events.append(self._read_message())

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                os.write(self.to_child, json.dumps(
                    {"id": 0, "method": "Browser.close"}).encode() + b"\0")
                self.proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
        for fd in (self.to_child, self.from_child):
            os.close(fd)
        self.log.close()
        self.profile.cleanup()


def console_errors(events: Sequence[dict[str, Any]]) -> list[str]:
    """Error-level console output of the page, one line each."""
    out = []
    for ev in events:
        method, params = ev.get("method"), ev.get("params", {})
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            out.append(" ".join(str(a.get("value", a.get("description", "")))
                                for a in params.get("args", [])))
        elif method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            out.append(details.get("exception", {}).get("description") or details.get("text", ""))
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            entry = params["entry"]
            out.append(f"{entry.get('text', '')} {entry.get('url', '')}".strip())
    return out


BOXES_JS = """JSON.stringify({height: document.documentElement.scrollHeight,
 boxes: Array.from(document.querySelectorAll(%s)).map(e => {
  const r = e.getBoundingClientRect();
  return {id: e.id, x: r.left + scrollX, y: r.top + scrollY, w: r.width, h: r.height};})})"""


def capture(page: Path, selector: str = "[data-chart]", scale: float = 1.0,
            timeout_s: float = 60.0, exe: str | None = None, fast: bool = False
            ) -> PageCapture:
    """Load `page`, wait for its load event, screenshot every element matching `selector`.
    `fast`: encode PNGs for speed (larger files; rows filtered with Up only)."""
    exe = exe or find_chromium()
    if exe is None:
        raise PerfkitError(f"needs {INSTALL_HINT}")
    with Chromium(exe, timeout_s) as browser:
        target = browser.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        sid = browser.send("Target.attachToTarget", {"targetId": target, "flatten": True})[
            "sessionId"]
        for domain in ("Runtime.enable", "Log.enable", "Page.enable"):
            browser.send(domain, session=sid)
        metrics = {"width": VIEWPORT_W, "height": 900, "deviceScaleFactor": scale,
                   "mobile": False}
        browser.send("Emulation.setDeviceMetricsOverride", metrics, sid)
        browser.send("Page.navigate", {"url": page.resolve().as_uri()}, sid)
        browser.wait_event("Page.loadEventFired")
        found = json.loads(browser.send("Runtime.evaluate", {
            "expression": BOXES_JS % json.dumps(selector), "returnByValue": True}, sid)[
            "result"]["value"])
        browser.send("Emulation.setDeviceMetricsOverride",
                     {**metrics, "height": int(found["height"]) + 1}, sid)
        shots = {}
        for box in found["boxes"]:
            clip = {"x": box["x"], "y": box["y"], "width": box["w"], "height": box["h"],
                    "scale": 1}
            data = browser.send("Page.captureScreenshot", {
                "format": "png", "clip": clip, "captureBeyondViewport": True,
                "optimizeForSpeed": fast}, sid)
            shots[box["id"]] = base64.b64decode(data["data"])
        return PageCapture(console_errors(browser.events), shots)
