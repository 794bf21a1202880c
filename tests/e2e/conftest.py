"""A real browser for the end-to-end tests: Debian's Chromium, driven by Playwright."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from typing import Any

import pytest

CHROMIUM = "/usr/bin/chromium"


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """Headless Chromium; `make test` installs it with apt-get (package chromium)."""
    from playwright.sync_api import sync_playwright

    path = shutil.which("chromium") or CHROMIUM
    with sync_playwright() as p:
        chromium = p.chromium.launch(
            executable_path=path, headless=True,
            # root in a VM without a GPU; no calls home
            args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                  "--disable-background-networking"])
        try:
            yield chromium
        finally:
            chromium.close()
