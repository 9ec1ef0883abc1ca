"""Where the run's outcome goes besides its own files: a Prometheus textfile, a Pushgateway,
and on GitHub Actions the job summary and annotations (``docs/dashboards.md``).

Called by :class:`specperf.plugin.reporting.ReportPlugin` once the record is written, on the
controller only; every output is rendered from that record (``views/prometheus.py``,
``views/github.py``). An output that fails loses nothing else: the run keeps its report and
says in one sentence what did not go out.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.errors import PublishError
from ..settings.config import Settings
from ..views import github, prometheus

SUMMARY_ENV = "GITHUB_STEP_SUMMARY"


@dataclass
class Published:
    """What went out and what did not: lines for the terminal, annotations for GitHub."""

    lines: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    annotations: list[str] = field(default_factory=list)


def publish(doc: Mapping[str, Any], settings: Settings, report: Path | None,
            environ: Mapping[str, str] | None = None) -> Published:
    """Write and push the run's outcome as the settings and the environment ask."""
    env = os.environ if environ is None else environ
    out = Published()
    textfile = settings.prometheus_textfile
    if textfile is not None:
        _attempt(out, lambda: prometheus.write_textfile(doc, textfile),
                 f"Prometheus textfile {textfile}")
    if settings.pushgateway is not None:
        url = settings.pushgateway
        _attempt(out, lambda: prometheus.push(doc, url),
                 f"pushed to {url} (job {prometheus.JOB}, deployment "
                 f"{prometheus.deployment(doc)})")
    summary = env.get(SUMMARY_ENV)
    if summary:  # on GitHub Actions: the job's page shows it
        _attempt(out, lambda: github.append_summary(doc, Path(summary), report),
                 f"GitHub job summary appended to {summary}")
        out.annotations = github.annotation_lines(doc)
    return out


def _attempt(out: Published, action: Callable[[], object], said: str) -> None:
    try:
        action()
    except PublishError as exc:
        out.problems.append(str(exc))
    else:
        out.lines.append(said)
