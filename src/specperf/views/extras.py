"""The pieces specperf adds to pytest-html's report (plugin/reporting.py's hooks): the
figure columns, the link to report.html and each case's samples, drawn by
templates/extras.html.j2 with the run page's own table markup, escaped like every view."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from . import template
from .page import samples_table

TEMPLATE = "extras.html.j2"


def header_cells(columns: Iterable[str]) -> list[str]:
    """The results table's header cells for specperf's columns."""
    return [template.fragment(TEMPLATE, "header_cell", c) for c in columns]


def row_cells(values: Iterable[str]) -> list[str]:
    """One test's cells in specperf's columns."""
    return [template.fragment(TEMPLATE, "row_cell", v) for v in values]


def report_link(path: Path) -> str:
    """The summary's line naming specperf's own report."""
    return template.fragment(TEMPLATE, "report_link", str(path))


def samples(case_id: str, data: Mapping[str, Any]) -> str:
    """A case's samples under its test in pytest-html's report."""
    return template.fragment(TEMPLATE, "samples", case_id, samples_table(data))
