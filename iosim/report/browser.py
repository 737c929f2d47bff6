"""Open a report in headless Chromium as a person would: read the page's own status element
(figures drawn, data traces present, JavaScript errors) and optionally save a screenshot.

No Python browser package: Chromium's --dump-dom prints the DOM after the page's scripts ran
(`--virtual-time-budget` lets its timers run), and --screenshot saves a PNG.
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-default-apps", "--disable-extensions", "--mute-audio",
         "--hide-scrollbars", "--disable-dev-shm-usage",
         "--host-resolver-rules=MAP * ~NOTFOUND"]   # no host resolves: nothing can be fetched
STATUS = re.compile(r'<pre id="iosim-status"[^>]*>(.*?)</pre>', re.S)


def find_chromium() -> str | None:
    for name in ("/usr/bin/chromium",) + CANDIDATES:
        path = shutil.which(name)
        if path:
            return path
    return None


def _run(args: list, timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout)


def page_status(html_path: Path, budget_ms: int = 10000, timeout: float = 120,
                chromium: str | None = None) -> dict:
    """The JSON the page writes into <pre id="iosim-status"> after its figures rendered."""
    chromium = chromium or find_chromium()
    if chromium is None:
        raise FileNotFoundError("chromium not found")
    url = Path(html_path).resolve().as_uri()
    with tempfile.TemporaryDirectory(prefix="iosim-chromium-") as profile:
        proc = _run([chromium, *FLAGS, f"--user-data-dir={profile}",
                     f"--virtual-time-budget={budget_ms}", "--dump-dom", url], timeout)
    m = STATUS.search(proc.stdout)
    if not m:
        raise RuntimeError("status element not found in the dumped DOM; chromium said: "
                           + proc.stderr.strip()[-500:])
    import html as _html
    return json.loads(_html.unescape(m.group(1)))


def screenshot(html_path: Path, png_path: Path, width: int = 1400, height: int = 4000,
               budget_ms: int = 10000, timeout: float = 120, chromium: str | None = None) -> Path:
    chromium = chromium or find_chromium()
    if chromium is None:
        raise FileNotFoundError("chromium not found")
    png_path = Path(png_path).resolve()
    url = Path(html_path).resolve().as_uri()
    with tempfile.TemporaryDirectory(prefix="iosim-chromium-") as profile:
        proc = _run([chromium, *FLAGS, f"--user-data-dir={profile}",
                     f"--virtual-time-budget={budget_ms}", f"--window-size={width},{height}",
                     f"--screenshot={png_path}", url], timeout)
    if not png_path.is_file():
        raise RuntimeError("no screenshot written; chromium said: " + proc.stderr.strip()[-500:])
    return png_path
