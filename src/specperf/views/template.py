"""The one module behind jinja2: every HTML view is a template, escaped by default.

The templates are package data under ``views/templates/``. Autoescape is on for all of them,
so any value a template prints — a model name, an error body, a case id — is HTML-escaped
wherever it lands; no view escapes by hand. The one raw fragment is a chart's inline SVG,
marked safe in :func:`trusted_svg` and nowhere else.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import jinja2
from markupsafe import Markup


@functools.cache
def environment() -> jinja2.Environment:
    """The templates' environment: autoescape on, an undefined name an error (not blank)."""
    return jinja2.Environment(
        loader=jinja2.PackageLoader("specperf.views", "templates"),
        autoescape=jinja2.select_autoescape(("html", "j2"), default_for_string=True,
                                            default=True),
        undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
        keep_trailing_newline=True)


def render(name: str, **context: Any) -> str:
    """A whole page: template ``name`` rendered with ``context``."""
    return environment().get_template(name).render(**context)


def fragment(name: str, macro: str, *args: Any) -> str:
    """One macro of template ``name`` rendered alone: a piece another page or a pytest-html
    hook embeds, drawn by the same markup the whole page uses."""
    return str(getattr(environment().get_template(name).module, macro)(*args))


def trusted_svg(svg: str) -> Markup:
    """A chart drawn by :mod:`specperf.views.plots`, marked as markup the page embeds as is."""
    # The only place a string becomes Markup. Safe because plots.py alone produces it:
    # matplotlib writes every label, title and legend entry (case ids, run ids, boundary
    # text) as escaped SVG <text>, and plots.to_svg only prefixes the ids matplotlib made.
    # Nothing from a server or a user reaches this string except through matplotlib.
    return Markup(svg)


# -- what the templates draw (macros.html.j2) --------------------------------------------------
@dataclass(frozen=True)
class Cell:
    """A table cell: its text (escaped when drawn), its attributes (class, colspan, data-*)
    and, with ``href``, the text is a link."""

    text: object
    attrs: Mapping[str, object] = field(default_factory=dict)
    tag: str = "td"
    href: str | None = None


def num(text: object) -> Cell:
    """A right-aligned figure."""
    return Cell(text, {"class": "num"})


@dataclass(frozen=True)
class Table:
    """A table: plain-text headers, rows of cells, the table's class and each row's attributes."""

    headers: Sequence[str]
    rows: Sequence[Sequence[Cell]]
    cls: str = ""
    row_attrs: Sequence[Mapping[str, object]] = ()


@dataclass(frozen=True)
class Span:
    """A run of text; with a class (``warn``, ``badge sim``) or a ``data-kind`` a <span>."""

    text: object
    cls: str = ""
    data_kind: str | None = None


@dataclass(frozen=True)
class Figure:
    """A chart with its caption; ``kind`` names it for tests and readers (data-plot)."""

    kind: str
    svg: Markup
    caption: str


def figure(kind: str, svg: str, caption: str) -> Figure:
    """A chart plots.py drew, captioned."""
    return Figure(kind, trusted_svg(svg), caption)
