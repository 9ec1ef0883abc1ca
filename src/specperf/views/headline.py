"""One short line per verdict, read from its fields: what moved, and the factor it names.

The whole sentence of a verdict is printed once (a regression by pytest under FAILURES) and
kept in results.json and report.html; the closing block and the top of the page say each
verdict again only as a line: a regression's :func:`headline` (what moved past its limit, by
how much, which factor), a noted, improved or undetermined verdict's :func:`reason`.

Every line is built from the verdict's fields (``details``: each metric's base, new, change,
limit and interval; a sweep's factors; ``attribution``; ``exact``; a ``factor`` field when
the record has one), never from its sentence. Only a verdict with no figures at all (an older
record) falls back to its sentence: :func:`_sentence_headline`. A path verdict's details are
its two routes' figures (judge/pathverdict.py), its factor "parser", "stream" or "transport".
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ..core.contract import IMPROVED, NOTED, REGRESSION, UNDETERMINED
from ..core.limits import FLOOR, format_percent, format_value
from ..judge.attribution import SECONDARY_SHARE, UNEXPLAINED_SHARE
from ..judge.hints import ACCEPTANCE_HINT, PREFILL_HINT, STEP_HINT
from ..judge.pathverdict import COMPARISONS, PARSER_HINT, STREAM_DECODE_HINT
from ..judge.sweep.factortest import SWEEP_TOLERANCE
from ..record.readers import scope_of

# The order a line names a case's metrics: what the user feels first.
_METRICS = (("tok_s", "tok/s", ""), ("avg_commit", "avg commit", ""),
            ("step_ms", "step time", " ms"), ("decode_tok_s", "decode tok/s", ""),
            ("ttft_ms", "prefill (TTFT)", " ms"))
# A path verdict's figures (judge/pathverdict.py), named by the routes they compare.
_PATH_METRICS = {
    COMPARISONS[0]: (("tok_s", "chat tok/s vs native", ""),
                     ("step_ms", "chat step time vs native", " ms"),
                     ("decode_tok_s", "server decode vs native", "")),
    COMPARISONS[1]: (("delivery_tok_s", "chat stream delivery vs native", ""),
                     ("decode_tok_s", "server decode vs native", "")),
    COMPARISONS[2]: (("step_ms", "server step time while streaming", " ms"),
                     ("decode_tok_s", "server decode while streaming", ""),
                     ("delivery_tok_s", "client delivery vs server decode", ""))}
# A sweep's factors as judge/sweep/verdict.py keys them in ``details`` (acceptance per text
# class: "acceptance:<class>"), with the direction a regression moves them.
_SWEEP = (("tok/s", "tok/s", -1), ("step", "step time", +1), ("acceptance", "avg commit", -1))
# The factors a regression can name: what moved, the words a line gives it, what to check.
FACTORS = {"acceptance": ("acceptance", "acceptance regression", ACCEPTANCE_HINT),
           "step": ("step time", "step-time regression", STEP_HINT),
           "acceptance+step": ("acceptance and step time", "acceptance and step-time regression",
                               "acceptance and step-time regression: check the drafter and the "
                               "text, then the kernels, attention backend and KV cache"),
           "prefill": ("prefill", "prefill regression", PREFILL_HINT),
           "slope": ("the context slope", "attention scaling regression",
                     "attention scaling regression: step time grows faster with context than "
                     "in the baseline"),
           "unexplained": ("tok/s", "neither acceptance nor step time",
                           "neither acceptance nor step time explains it: check prefill, "
                           "transport and the client"),
           # A path verdict's (judge/pathverdict.py): two routes of one case, not a baseline.
           "parser": ("the parser path", "parser-path regression", PARSER_HINT),
           "stream": ("the streaming path", "streaming-path regression",
                      f"streaming-path regression: {STREAM_DECODE_HINT}"),
           "transport": ("transport", "transport/client regression",
                         "transport/client regression: the server decoded at its pace and the "
                         "chunks reached the client late; check proxies, tunnels and the "
                         "network between client and server")}
LINE_MAX = 200  # an old record's sentence, cut to one terminal line


def headline(verdict: Mapping[str, Any]) -> str:
    """'tok/s 54.5 → 38.1 (−30.1%, limit −10%); also past their limits: step time +31.9% —
    step-time regression': every metric past its limit (marked undetermined where its
    interval reaches back inside the limit), then the factor the verdict names."""
    details = verdict.get("details") or {}
    if is_sweep(verdict):
        what = _sweep_moves(details, (REGRESSION,))
    elif "slope" in details:
        what = _slope(details["slope"])
    else:
        what = _case_moves(details, _metrics_of(verdict))
    if not what:
        return _sentence_headline(str(verdict.get("message", "")))
    exact = verdict.get("exact") or {}
    if exact.get("status") == "changed" and exact.get("compared"):
        cause = f": the {exact['cause']}" if exact.get("cause") else ""
        what += (f"; acceptance changed on {exact.get('changed')} of {exact['compared']} "
                 f"prompts{cause}")
    name = factor(verdict)
    return f"{what} \u2014 {FACTORS[name][1]}" if name in FACTORS else what


def reason(verdict: Mapping[str, Any], sweep_tolerance: float = SWEEP_TOLERANCE) -> str:
    """A noted, improved or undetermined verdict in one line: the figures that made it so
    (a change we are sure of inside the limit; past it on the good side; an interval across
    the limit); a record without them, its sentence cut to one line."""
    details = verdict.get("details") or {}
    status = str(verdict.get("status"))
    if verdict.get("reason") == "no-baseline":
        return "nothing in the baseline to compare with"
    if is_sweep(verdict):
        found = _sweep_moves(details, (status,), sweep_tolerance)
        if found and status == UNDETERMINED:
            found += f": its interval reaches past the {_pct(sweep_tolerance, 0)[1:]} sweep " \
                     "tolerance"
    elif "slope" in details:
        found = _slope(details["slope"], status)
    else:
        found = "; ".join(_case_reason(details, status, _metrics_of(verdict)))
    # Without figures (an older record, or a change only the sentence locates, such as a draft
    # position's), the sentence's end: where a noted or open verdict says why.
    return found or one_line(str(verdict.get("message", "")), tail=True)


def factor(verdict: Mapping[str, Any]) -> str:
    """The factor a regression names (a key of :data:`FACTORS`, or '' when none can be read):
    the record's own ``factor`` field when it has one; else the factors past their limits
    with confidence; else, for a tok/s drop, its attribution's shares (judge/attribution.py's
    thresholds)."""
    if verdict.get("factor"):
        return str(verdict["factor"])
    details = verdict.get("details") or {}
    if is_sweep(verdict):
        moved = {key.partition(":")[0] for key, d in details.items()
                 if isinstance(d, Mapping) and d.get("regressed")} - {"tok/s"}
        return "acceptance+step" if moved == {"acceptance", "step"} else next(iter(moved), "")
    if "slope" in details:
        return "slope" if _regressed("slope", details["slope"]) else ""
    moved = {m for m in ("avg_commit", "step_ms", "ttft_ms")
             if m in details and _regressed(m, details[m])}
    if {"avg_commit", "step_ms"} <= moved:
        return "acceptance+step"
    for metric, name in (("avg_commit", "acceptance"), ("step_ms", "step"),
                         ("ttft_ms", "prefill")):
        if metric in moved:
            return name
    if any(_regressed(m, details[m]) for m in ("tok_s", "decode_tok_s") if m in details):
        return _by_shares(verdict.get("attribution") or {})
    return ""


def _by_shares(shares: Mapping[str, float]) -> str:
    """A tok/s drop neither factor passed its limit in, named by its attribution's shares."""
    if not shares:
        return ""
    acc, step = shares.get("acceptance", 0.0), shares.get("step", 0.0)
    if shares.get("rest", 0.0) >= UNEXPLAINED_SHARE or max(acc, step) < SECONDARY_SHARE:
        return "unexplained"
    if min(acc, step) >= SECONDARY_SHARE:
        return "acceptance+step"
    return "acceptance" if acc > step else "step"


def is_sweep(verdict: Mapping[str, Any]) -> bool:
    """A sweep's verdict (its scope; record/readers.py scope_of)."""
    return scope_of(verdict) == "sweep"


def one_line(message: str, tail: bool = False) -> str:
    """A sentence on one line, cut at a word near :data:`LINE_MAX` characters (its end kept
    with ``tail``)."""
    flat = " ".join(message.split())
    if len(flat) <= LINE_MAX:
        return flat
    if tail:
        return "\u2026 " + flat[-LINE_MAX:].split(" ", 1)[-1]
    return flat[:LINE_MAX].rsplit(" ", 1)[0].rstrip(",;:") + " \u2026"


# -- a case's metrics ---------------------------------------------------------------------------
Metrics = tuple[tuple[str, str, str], ...]


def _metrics_of(verdict: Mapping[str, Any]) -> Metrics:
    """The figures a verdict's details hold, in the order a line names them: a case's, or a
    path comparison's (its case id ends with the comparison)."""
    case = str(verdict.get("case_id", ""))
    return next((m for end, m in _PATH_METRICS.items() if case.endswith(end)), _METRICS)


def _case_moves(details: Mapping[str, Any], metrics: Metrics = _METRICS) -> str:
    moved = [(details[key], name, unit, key) for key, name, unit in metrics
             if _beyond(details.get(key), key)]
    if not moved:
        return ""
    what = _figure(*moved[0])
    if len(moved) > 1:
        what += "; also past their limits: " + ", ".join(
            f"{name} {_pct(entry['change'])}{' (undetermined)' if _straddles(entry) else ''}"
            for entry, name, _, _ in moved[1:])
    return what


def _case_reason(details: Mapping[str, Any], status: str, metrics: Metrics = _METRICS
                 ) -> list[str]:
    """The metrics behind a case's word: for noted, the changes we are sure of (inside their
    limits); for improved, those past the limit on the good side; for undetermined, the
    intervals across a limit."""
    out = []
    for key, name, unit in metrics:
        entry = details.get(key)
        if not entry or entry.get("change") is None or not entry.get("limit"):
            continue
        low, high = entry.get("low"), entry.get("high")
        if status == UNDETERMINED and _straddles(entry):
            out.append(f"{_figure(entry, name, unit, key)} has a 95% interval of "
                       f"{_pct(float(low))} to {_pct(float(high))}, across the limit")
        elif status == IMPROVED and _beyond(entry, key, good=True):
            out.append(f"{_figure(entry, name, unit, key)}, better beyond the limit")
        elif status == NOTED and low is not None and high is not None and \
                (float(low) > 0 or float(high) < 0):
            out.append(f"{_figure(entry, name, unit, key)}, a change we are sure of, inside "
                       "the limit")
    return out


def _beyond(entry: Mapping[str, Any] | None, metric: str = "", good: bool = False) -> bool:
    """A metric's median past its limit, in the limit's (bad) direction, or with ``good``
    past it the other way; a move inside the metric's floor (ms) never is."""
    if not entry or entry.get("change") is None or not entry.get("limit"):
        return False
    base, new = entry.get("base"), entry.get("new")
    if metric in FLOOR and base is not None and new is not None and \
            abs(float(new) - float(base)) < FLOOR[metric]:
        return False
    change, limit = float(entry["change"]), float(entry["limit"])
    if good:  # the same distance on the other side of no change
        return change > -limit if limit < 0 else change < -limit
    return change < limit if limit < 0 else change > limit


def _regressed(metric: str, entry: Mapping[str, Any]) -> bool:
    """Past its limit with confidence: the median, and its whole interval when it has one."""
    return _beyond(entry, metric) and not _straddles(entry)


def _straddles(entry: Mapping[str, Any]) -> bool:
    """The change's interval (when the verdict gives one) reaches across the limit."""
    low, high, limit = entry.get("low"), entry.get("high"), float(entry["limit"])
    if low is None or high is None:
        return False
    return float(low) < limit < float(high)


def _figure(entry: Mapping[str, Any], name: str, unit: str, metric: str = "") -> str:
    """'step time 5.3 → 11 ms (+100.1%, limit +75%)': values at the precision of every other
    sentence (core.limits.format_value); a metric-less figure (a slope) at one decimal."""
    base, new = entry.get("base"), entry.get("new")
    values = (f"{_value(metric, base)} \u2192 {_value(metric, new)}{unit} "
              if None not in (base, new) else "")
    unsure = ", undetermined" if _straddles(entry) else ""
    return f"{name} {values}({_pct(entry['change'])}, limit {_pct(entry['limit'], 0)}{unsure})"


def _value(metric: str, value: Any) -> str:
    return format_value(metric, float(value)) if metric else f"{float(value):.1f}"


def _slope(entry: Mapping[str, Any], status: str = "") -> str:
    """A context fit's slope: 'step time per 1k context 17.7 → 23.0 ms (+30.1%, limit +15%)',
    with its 95% interval (the fit's ``margin``) when that is why it is undetermined."""
    if entry.get("change") is None or not entry.get("limit"):
        return ""
    found = dict(entry)
    base, new, margin = entry.get("base"), entry.get("new"), entry.get("margin")
    if base and new is not None and margin:
        found.update(low=(float(new) - float(margin)) / float(base) - 1.0,
                     high=(float(new) + float(margin)) / float(base) - 1.0)
    text = _figure(found, "step time per 1k context", " ms")
    if status == UNDETERMINED and "low" in found:
        text += (f" has a 95% interval of {_pct(found['low'])} to {_pct(found['high'])}, "
                 + ("across the limit" if _straddles(found) else "too wide to decide"))
    return text


# -- a sweep's factors --------------------------------------------------------------------------
def sweep_factors(details: Mapping[str, Any], tolerance: float = SWEEP_TOLERANCE
                  ) -> list[tuple[str, str, Mapping[str, Any]]]:
    """A sweep's factors as (status, name, figures): the status its record gives (``status``,
    or the ``regressed`` and ``noted`` flags); else read off its interval against the sweep
    ``tolerance``: past it on the good side is improved, reaching past it on the bad side is
    undetermined, anything else a pass."""
    out = []
    for key, entry in details.items():
        if not isinstance(entry, Mapping) or "change" not in entry:
            continue
        head, _, scope = key.partition(":")
        name, sign = next(((n, s) for k, n, s in _SWEEP if k == head), (head, -1))
        out.append((_sweep_status(entry, sign, tolerance),
                    f"{name} on {scope}" if scope else name, entry))
    order = [name for _, name, _ in _SWEEP]
    return sorted(out, key=lambda f: order.index(f[1].split(" on ")[0])
                  if f[1].split(" on ")[0] in order else len(order))


def _sweep_status(entry: Mapping[str, Any], sign: int, tolerance: float) -> str:
    if entry.get("status"):
        return str(entry["status"])
    if entry.get("regressed"):
        return "fail"
    if entry.get("noted"):
        return "noted"
    low, high = entry.get("low"), entry.get("high")
    if low is None or high is None:
        return "pass"
    worse = sorted((sign * float(low), sign * float(high)))  # positive: the bad direction
    if worse[1] < -tolerance:
        return "improved"
    return "undetermined" if worse[1] > tolerance else "pass"


def _sweep_moves(details: Mapping[str, Any], statuses: tuple[str, ...],
                 tolerance: float = SWEEP_TOLERANCE) -> str:
    """The sweep's factors of these ``statuses``: 'step time +15.0% (95% CI +14.1% to
    +15.9%)'."""
    return "; ".join(f"{name} {format_percent(float(entry['change']))}"
                     f"{_interval(entry)}{'' if len(statuses) == 1 else f' ({status})'}"
                     for status, name, entry in sweep_factors(details, tolerance)
                     if status in statuses)


def _interval(entry: Mapping[str, Any]) -> str:
    low, high = entry.get("low"), entry.get("high")
    if low is None or high is None:
        return ""
    level = float(entry.get("level") or 0.95)  # older records: their 95 % interval
    return (f" ({100 * level:g}% CI {format_percent(float(low))} to "
            f"{format_percent(float(high))})")


def _pct(fraction: float, digits: int = 1) -> str:
    return f"{100 * fraction:+.{digits}f}%".replace("-", "\u2212")


# -- a verdict without figures ------------------------------------------------------------------
_FACTOR_WORDS = re.compile(r" \u2014 ((?:[\w-]+ )*?[\w-]+ regression)\b")


def _sentence_headline(message: str) -> str:
    """The fallback for a verdict whose record holds no figures (see the module docstring):
    its sentence's opening figure (the first clause with a number, ending at ':' or ' — '
    outside parentheses) and the regression its sentence names; else the sentence on one
    line."""
    depth, start, head = 0, 0, ""
    for i, char in enumerate(message):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth == 0 and (message.startswith(": ", i) or message.startswith(" \u2014 ", i)):
            if any(c.isdigit() for c in message[start:i]):
                head = message[start:i]
                break
            start = i + (2 if message[i] == ":" else 3)
    named = _FACTOR_WORDS.search(message)
    if not head:
        return one_line(message)
    return one_line(f"{head} \u2014 {named[1]}" if named else head)
