"""How a setting's text is read: one parser per accepted form.

Each takes the raw string (flag, environment variable or ini key alike) and returns the typed
value, or raises ``ValueError`` (:func:`~specperf.settings.config.resolve` then names the
source and the option's form) or a :class:`ConfigError` naming the bad item.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from ..core.errors import ConfigError
from ..core.limits import check_tolerance

Parser = Callable[[str], Any]


def int_list(text: str) -> tuple[int, ...]:
    # Every item must be a number: "13,,20" is a typo, not two contexts.
    values = tuple(int(v) for v in text.replace(" ", "").split(","))
    if not values or any(v <= 0 for v in values):
        raise ValueError(text)
    return values


def name_list(text: str) -> tuple[str, ...]:
    values = tuple(v.strip() for v in text.split(","))
    if not values or not all(values):
        raise ValueError(text)
    return values


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise ValueError(text)
    return value


def nonneg_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise ValueError(text)
    return value


def positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise ValueError(text)
    return value


def fraction(text: str) -> float:
    value = float(text)
    if not 0 < value <= 1:
        raise ValueError(text)
    return value


def noise_fraction(text: str) -> float:
    value = float(text)
    if not 0 <= value < 1:
        raise ValueError(text)
    return value


def yes_no(text: str) -> bool:
    low = text.strip().lower()
    if low in ("1", "true", "yes", "on"):
        return True
    if low in ("0", "false", "no", "off", ""):
        return False
    raise ValueError(text)


def http_url(text: str) -> str:
    parts = urlsplit(text.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(text)
    return text.strip().rstrip("/")


def database_url(text: str) -> str:
    """A results store: ``postgresql://USER@HOST:PORT/DB``, ``sqlite:///PATH`` or a file path;
    never a password (it would be recorded with the settings: libpq reads PGPASSWORD or
    ~/.pgpass)."""
    text = text.strip()
    parts = urlsplit(text)
    if parts.scheme in ("postgresql", "postgres"):
        if not parts.hostname:
            raise ValueError(text)
        if parts.password is not None:
            raise ConfigError("a password in the URL would be recorded in every results.json: "
                              "remove it and put it in PGPASSWORD or ~/.pgpass.")
        return text
    if parts.scheme == "sqlite" and text.startswith("sqlite:///") and len(text) > 10:
        return text
    if "://" in text or not text:
        raise ValueError(text)
    return f"sqlite:///{Path(text).expanduser().resolve()}"


def choice(*choices: str) -> Parser:
    def parse(text: str) -> str:
        if text not in choices:
            raise ValueError(text)
        return text

    return parse


def any_text(text: str) -> str:
    return text


def file_path(text: str) -> Path:
    return Path(text).expanduser()


def baseline_version(text: str) -> int | Literal["latest"]:
    return "latest" if text.strip() == "latest" else positive_int(text)


def tolerance_items(text: str) -> dict[str, float]:
    """'metric = fraction' items, comma separated or one per line; each checked, a bad one
    a ConfigError naming it (resolve puts the source in front)."""
    out: dict[str, float] = {}
    for item in (part.strip() for line in text.splitlines() for part in line.split(",")):
        if not item:
            continue
        key, sep, value = (x.strip() for x in item.partition("="))
        out[key] = check_tolerance(key, value if sep else None, repr(item))
    return out


def case_lengths(text: str) -> dict[str, int]:
    """'case=tokens' items: a case id (``padding-ctx3333``) and the output length it decodes
    instead of --specperf-output-tokens."""
    return _case_items(text, "case=tokens (e.g. padding-ctx3333=128)")


def case_counts(text: str) -> dict[str, int]:
    """'case=n' items: a case id and the fewest requests it takes instead of the run's."""
    return _case_items(text, "case=requests (e.g. padding-ctx13=32)")


def _case_items(text: str, form: str) -> dict[str, int]:
    """'case=positive integer' items, comma separated or one per line."""
    out: dict[str, int] = {}
    for item in (part.strip() for line in text.splitlines() for part in line.split(",")):
        if not item:
            continue
        key, sep, value = (x.strip() for x in item.partition("="))
        if not sep or "-ctx" not in key or not value.isdigit() or int(value) < 1:
            raise ConfigError(f"{item!r} is not {form}")
        out[key] = int(value)
    return out


def declared_items(text: str) -> dict[str, str]:
    """'key=value' items, comma separated or one per line (what a server does not report)."""
    out: dict[str, str] = {}
    for item in (part.strip() for line in text.splitlines() for part in line.split(",")):
        if not item:
            continue
        key, sep, value = (x.strip() for x in item.partition("="))
        if not sep or not key.isidentifier() or not value:
            raise ConfigError(f"{item!r} is not key=value (e.g. draft_model=draft.gguf)")
        out[key] = value
    return out
