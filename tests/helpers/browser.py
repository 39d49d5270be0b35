"""Headless Chromium driven over its DevTools protocol (the ``websockets`` package MLflow already
needs): a new, empty profile, real mouse clicks on what a person would click, and screenshots of
what the page shows then (``scripts/screenshots.py``'s click path); with ``offline=True`` every
request the page makes goes to a closed port (what the explorer page's tests and benchmark need:
a page that fetches nothing)."""

from __future__ import annotations

import base64
import json
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

from websockets.sync.client import connect


class Browser:
    """One headless Chromium with a new, empty profile, and its one tab."""

    def __init__(self, binary: str, width: int = 1800, height: int = 1000, timeout: float = 120, *, offline: bool = False) -> None:
        self.profile = tempfile.TemporaryDirectory(prefix="t2exp-profile-")
        self.proc = subprocess.Popen(
            [
                binary,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--hide-scrollbars",
                f"--user-data-dir={self.profile.name}",
                f"--window-size={width},{height}",
                "--remote-debugging-port=0",
                *(["--proxy-server=127.0.0.1:9", "--proxy-bypass-list=<-loopback>"] if offline else []),
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        port_file = Path(self.profile.name) / "DevToolsActivePort"
        self.port = int(self._until(lambda: port_file.is_file() and port_file.read_text().split("\n")[0], timeout, "DevTools port"))
        self.ws = None
        self._next = 0
        self.attach()

    def _until(self, probe, timeout: float, what: str):
        end = time.monotonic() + timeout
        while True:
            value = probe()
            if value:
                return value
            if time.monotonic() > end:
                raise SystemExit(f"the browser: no {what} within {timeout:.0f}s")
            time.sleep(0.25)  # polling the page: nothing to wait on but its state

    def pages(self) -> list[dict]:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/json/list", timeout=10) as r:
            return [t for t in json.load(r) if t["type"] == "page"]

    def attach(self, target: dict | None = None) -> None:
        target = target or self.pages()[0]
        if self.ws is not None:
            self.ws.close()
        self.ws = connect(target["webSocketDebuggerUrl"], max_size=None)
        self.target_id = target["id"]

    def send(self, method: str, **params):
        self._next += 1
        self.ws.send(json.dumps({"id": self._next, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv(timeout=120))
            if msg.get("id") == self._next:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})

    def js(self, expr: str):
        r = self.send("Runtime.evaluate", expression=expr, returnByValue=True, awaitPromise=True)
        return r.get("result", {}).get("value")

    def goto(self, url: str) -> None:
        self.send("Page.navigate", url=url)

    def wait_text(self, text: str, timeout: float = 90) -> None:
        self._until(
            lambda: self.js(f"document.body && document.body.innerText.includes({json.dumps(text)})"),
            timeout,
            f"text {text!r} on {self.js('location.href')}",
        )
        time.sleep(1.5)  # let the page settle (charts, fonts) before a picture

    def click(self, text: str, selector: str = "a, button, [role=button], [role=tab], [role=radio], label, span") -> str:
        """A real mouse click on the innermost visible element matching ``selector`` whose text (or,
        for an icon button, its ``aria-label``) is ``text``; follows a tab it opens. Returns the
        page's address after it."""
        find = f"""(() => {{
          const els = [...document.querySelectorAll({json.dumps(selector)})].filter(e => {{
            const r = e.getBoundingClientRect();
            const said = (e.innerText || '').trim() || e.getAttribute('aria-label');
            return r.width > 0 && r.height > 0 && said === {json.dumps(text)}; }});
          if (!els.length) return null;
          const e = els[els.length - 1]; e.scrollIntoView({{block: 'center'}});
          const r = e.getClientRects()[0]; return [r.x + r.width / 2, r.y + r.height / 2];  // a wrapped link: its first line
        }})()"""
        xy = self._until(lambda: self.js(find), 60, f"element {text!r} to click on {self.js('location.href')}")
        before = {p["id"] for p in self.pages()}
        for kind in ("mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", type=kind, x=xy[0], y=xy[1], button="left", clickCount=1)
        time.sleep(1.0)
        new = [p for p in self.pages() if p["id"] not in before]
        if new:  # the link opened a tab: go on there
            self.attach(new[0])
        return str(self.js("location.href"))

    def shot(self, path: Path) -> None:
        data = self.send("Page.captureScreenshot", format="png")["data"]
        path.write_bytes(base64.b64decode(data))

    def close(self) -> None:
        import psutil

        if self.ws is not None:
            self.ws.close()
        try:  # its renderers and utility processes write into the profile too: they end before it is removed
            helpers = psutil.Process(self.proc.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            helpers = []
        self.proc.terminate()
        self.proc.wait(timeout=30)
        for p in psutil.wait_procs(helpers, timeout=30)[1]:
            p.kill()
        self.profile.cleanup()
