"""Real headless Chromium (Debian's `chromium-headless-shell` package) driven by Playwright.

Never a browser that Playwright downloads: `make test` installs the distribution's build
(scripts/system-packages.sh), the same Chromium release as its `chromium`. The headless shell
is the same Blink and V8 without the desktop browser around them (what Playwright itself runs
headless): a fraction of the CPU full Chromium spends per page in its new headless mode.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from playwright.sync_api import Browser, sync_playwright

CHROMIUM = Path("/usr/bin/chromium-headless-shell")

_ARGS = [
    "--no-sandbox",  # CI runs as root, where Chromium's sandbox cannot start
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    # Audio starts without a click, and the microphone is a fake device that needs no prompt.
    "--autoplay-policy=no-user-gesture-required",
    "--use-fake-device-for-media-stream",
    "--use-fake-ui-for-media-stream",
]


@contextmanager
def chromium() -> Iterator[Browser]:
    if not CHROMIUM.exists():
        raise RuntimeError(
            f"{CHROMIUM} is missing: `apt-get install chromium-headless-shell` (make test does)"
        )
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=_ARGS)
        try:
            yield browser
        finally:
            browser.close()
