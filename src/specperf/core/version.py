"""The suite's version (pyproject.toml's ``version``), stamped on every baseline and record.

Here, in the lowest room, so a room that stamps it never imports the top floor (the public
API, which lists every room's names).
"""

from __future__ import annotations

__version__ = "0.2.0"
