"""One short line per failing verdict, for the terminal's closing block.

The whole sentence of a regression is printed once, by pytest under FAILURES (and kept in
results.json and report.html); the closing block lists each failure again only as a headline:
what moved past its limit, by how much, and which factor the verdict names.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

# The order a headline names the metrics past their limits: what the user feels first.
_METRICS = (("tok_s", "tok/s", "{:.1f}", ""), ("avg_commit", "avg commit", "{:.2f}", ""),
            ("step_ms", "step time", "{:.0f}", " ms"),
            ("decode_tok_s", "decode tok/s", "{:.1f}", ""),
            ("ttft_ms", "prefill (TTFT)", "{:.0f}", " ms"))
_FACTOR = re.compile(r"— ((?:[\w-]+ )*?[\w-]+ regression)\b")


def headline(verdict: Mapping[str, Any]) -> str:
    """'tok/s 54.5 → 38.1 (−30.1%, limit −10%); also past their limits: step time +31.9% —
    step-time regression': every metric past its limit as a point (marked undetermined where
    its interval reaches back inside the limit), then the verdict's factor."""
    message = str(verdict.get("message", ""))
    details = verdict.get("details") or {}
    moved = [(details[key], name, fmt, unit) for key, name, fmt, unit in _METRICS
             if _beyond(details.get(key))]
    what = _figure(*moved[0]) if moved else _first_clause(message)
    if len(moved) > 1:
        what += "; also past their limits: " + ", ".join(
            f"{name} {_pct(entry['change'])}{' (undetermined)' if _straddles(entry) else ''}"
            for entry, name, _, _ in moved[1:])
    exact = verdict.get("exact") or {}
    if exact.get("status") == "changed" and exact.get("compared"):
        cause = f": the {exact['cause']}" if exact.get("cause") else ""
        what += (f"; acceptance changed on {exact.get('changed')} of {exact['compared']} "
                 f"prompts{cause}")
    factor = _factor(message)
    return f"{what} — {factor}" if factor else what


def _beyond(entry: Mapping[str, Any] | None) -> bool:
    """A metric's change past its limit, in the limit's (bad) direction."""
    if not entry or entry.get("change") is None or not entry.get("limit"):
        return False
    change, limit = float(entry["change"]), float(entry["limit"])
    return change < limit if limit < 0 else change > limit


def _straddles(entry: Mapping[str, Any]) -> bool:
    """The change's interval (when the verdict gives one) reaches back inside the limit: past
    it as a point, but not with confidence."""
    low, high, limit = entry.get("low"), entry.get("high"), float(entry["limit"])
    if low is None or high is None:
        return False
    return float(high) >= limit if limit < 0 else float(low) <= limit


def _figure(entry: Mapping[str, Any], name: str, fmt: str, unit: str) -> str:
    base, new = entry.get("base"), entry.get("new")
    values = f"{fmt.format(base)} → {fmt.format(new)}{unit} " if None not in (base, new) else ""
    unsure = ", undetermined" if _straddles(entry) else ""
    return f"{name} {values}({_pct(entry['change'])}, limit {_pct(entry['limit'], 0)}{unsure})"


def _pct(fraction: float, digits: int = 1) -> str:
    return f"{100 * fraction:+.{digits}f}%".replace("-", "\u2212")


def _first_clause(message: str) -> str:
    """The sentence's opening figure: its first clause with a number in it, a clause ending
    at ':' or ' — ' outside parentheses ('padding: step time per 1k … (+30.1%, limit +15%)'
    gives the second)."""
    depth, start = 0, 0
    for i, char in enumerate(message):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth == 0 and (message.startswith(": ", i) or message.startswith(" — ", i)):
            if any(c.isdigit() for c in message[start:i]):
                return message[start:i]
            start = i + (2 if message[i] == ":" else 3)
    return message[start:].rstrip(".")


def _factor(message: str) -> str:
    """The diagnosis the verdict gives tok/s ('acceptance and step-time regression'); a
    verdict without tok/s, its first."""
    start = message.find("tok/s")
    found = _FACTOR.search(message, max(start, 0)) or _FACTOR.search(message)
    return found[1] if found else ""
