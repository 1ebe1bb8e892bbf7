"""A small W3C WebDriver client over httpx, driving Debian's chromium through /usr/bin/chromedriver.

Plain HTTP rather than the `selenium` package: the protocol needs a dozen endpoints, httpx is already a dependency,
and nothing can reach for a driver or browser download. Waits are conditions evaluated in the page
(`wait_for`: an async script that re-checks on the browser's own timer until the condition holds), never sleeps in
the test.
"""

from __future__ import annotations

import base64
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
ELEMENT = "element-6066-11e4-a52e-4f735466cecf"
# The network is closed: without these, chromium waits on connections (updates, sync, field trials) and hangs.
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]


def browser_missing() -> str | None:
    """Why the browser tests cannot run here, or None."""
    if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
        return (
            "the browser could not be installed: /usr/bin/chromium or /usr/bin/chromedriver is missing "
            "(scripts/install_browser.sh installs them with apt-get)"
        )
    return None


class WebDriverError(RuntimeError):
    pass


class Browser:
    def __init__(self, client: httpx.Client, session: str) -> None:
        self.client = client
        self.session = session

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        response = self.client.request(method, f"/session/{self.session}{path}", json=body)
        value = response.json().get("value")
        if response.status_code >= 400:
            raise WebDriverError(f"{method} {path}: {value}")
        return value

    def get(self, url: str) -> None:
        self._call("POST", "/url", {"url": url})

    def resize(self, width: int, height: int) -> None:
        self._call("POST", "/window/rect", {"width": width, "height": height})

    def execute(self, script: str, *args: Any) -> Any:
        return self._call("POST", "/execute/sync", {"script": script, "args": list(args)})

    def find(self, css: str) -> str:
        return str(self._call("POST", "/element", {"using": "css selector", "value": css})[ELEMENT])

    def click(self, css: str) -> None:
        self._call("POST", f"/element/{self.find(css)}/click", {})

    def type(self, css: str, text: str, *, clear: bool = True) -> None:
        element = self.find(css)
        if clear:
            self._call("POST", f"/element/{element}/clear", {})
        self._call("POST", f"/element/{element}/value", {"text": text})

    def text(self, css: str) -> str:
        return str(self._call("GET", f"/element/{self.find(css)}/text"))

    def wait_for(self, condition: str, *args: Any, timeout_ms: int = 15000) -> Any:
        """Evaluate `condition` (a JS function body returning a truthy value when done, `args` as `args`) in the
        page until it holds; return its value, or raise with `condition` after `timeout_ms`."""
        script = (
            "const done = arguments[arguments.length - 1];"
            "const args = Array.prototype.slice.call(arguments, 0, -1);"
            f"const check = () => {{ {condition} }};"
            f"const deadline = Date.now() + {timeout_ms};"
            "(function poll() {"
            "  let value; try { value = check(); } catch (e) { value = null; }"
            "  if (value) done(value); else if (Date.now() > deadline) done(null); else setTimeout(poll, 25);"
            "})();"
        )
        value = self._call("POST", "/execute/async", {"script": script, "args": list(args)})
        if not value:
            raise WebDriverError(f"condition not met in {timeout_ms} ms: {condition}")
        return value

    def on_new_document(self, source: str) -> str:
        """Run `source` in every page this session loads from now on, before the page's own scripts (chromium's
        DevTools `Page.addScriptToEvaluateOnNewDocument`; such a script is not subject to the page's CSP).
        Returns its identifier for `forget_script`."""
        body = {"cmd": "Page.addScriptToEvaluateOnNewDocument", "params": {"source": source}}
        return str(self._call("POST", "/goog/cdp/execute", body)["identifier"])

    def forget_script(self, identifier: str) -> None:
        """Pages loaded from now on no longer run the `on_new_document` script `identifier`."""
        body = {"cmd": "Page.removeScriptToEvaluateOnNewDocument", "params": {"identifier": identifier}}
        self._call("POST", "/goog/cdp/execute", body)

    def screenshot(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(self._call("GET", "/screenshot")))


@contextmanager
def chromium(downloads: Path) -> Iterator[Browser]:
    """A headless chromium session with a fresh profile; chromedriver on a port of its own choosing."""
    profile = Path(tempfile.mkdtemp(prefix="reme-chromium-"))
    drain: threading.Thread | None = None
    driver = subprocess.Popen(
        [str(CHROMEDRIVER), "--port=0", "--log-level=SEVERE"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert driver.stdout is not None
        line = ""
        while "started successfully" not in line:  # "ChromeDriver was started successfully on port N."
            line = driver.stdout.readline()
            if not line:
                raise WebDriverError("chromedriver exited before it was ready")
        port = int(line.rsplit("port", 1)[1].strip(" .\n"))
        # keep reading what it prints, so a full pipe never stalls it
        drain = threading.Thread(target=driver.stdout.read, daemon=True, name="chromedriver-stdout")
        drain.start()
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as client:
            options = {
                "binary": str(CHROMIUM),
                "args": [*FLAGS, f"--user-data-dir={profile}", "--window-size=1280,900"],
                "prefs": {"download.default_directory": str(downloads), "download.prompt_for_download": False},
            }
            capabilities = {"alwaysMatch": {"browserName": "chrome", "goog:chromeOptions": options}}
            response = client.post("/session", json={"capabilities": capabilities})
            value = response.json()["value"]
            if response.status_code >= 400:
                raise WebDriverError(f"no session: {value}")
            browser = Browser(client, value["sessionId"])
            browser._call("POST", "/timeouts", {"script": 30000, "implicit": 0})
            try:
                yield browser
            finally:
                client.delete(f"/session/{browser.session}")
    finally:
        driver.terminate()
        driver.wait(timeout=30)
        if drain is not None:
            drain.join(timeout=30)  # it ends at the pipe's end, once chromedriver has exited
        if driver.stdout is not None:
            driver.stdout.close()
        shutil.rmtree(profile, ignore_errors=True)
