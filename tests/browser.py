"""Headless Chromium for the report tests: screenshots and the rendered DOM of a page.

.ci/run installs Chromium from Debian (`apt-get install -y chromium`); a test that needs it
skips without it, and CI fails on any skip.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync")
needs_chromium = pytest.mark.skipif(
    not CHROMIUM.exists(), reason="headless Chromium not installed (apt-get install -y chromium)")


def chromium(*args: str, tmp: Path) -> subprocess.CompletedProcess[str]:
    """Run headless Chromium with a fresh profile under ``tmp``; raises if it fails."""
    profile = tmp / f"chrome-{len(list(tmp.glob('chrome-*')))}"
    return subprocess.run([str(CHROMIUM), *FLAGS, f"--user-data-dir={profile}", *args],
                          capture_output=True, text=True, timeout=120, check=True)
