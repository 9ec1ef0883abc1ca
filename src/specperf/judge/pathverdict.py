"""Verdicts between paths of one case: the chat route against the native one, a stream
against the same request unstreamed. Each says in one sentence what differs and where.

Attribution separates the *decode* (what the server's own timings show: decode tok/s,
step time) from what happens after it: *post-processing* on the server's HTTP side (the
parsers; client wall − server e2e grows on the chat route) and *transport/client*
overhead (a stream's chunks reach the client slower than the server decoded them). Only
a slower decode, or post-processing on the chat route, fails; transport overhead is
labelled, never blamed on the server: a stream that reaches the client clearly slower than
the server decoded is a regression of what the user gets, in transport or the client.

Every status is the verdict contract's (:mod:`specperf.core.contract`): each figure's change
carries an interval from the paths' repeats (their medians' standard errors, both sides), so
a comparison is a regression or an improvement only beyond the tolerance with confidence,
noted when sure of a change inside it, undetermined when the interval straddles it; the
parts combine with :func:`specperf.core.contract.combine`. A comparison whose figure the
server did not report is undetermined with reason ``unmeasured`` (its test errors).
"""

from __future__ import annotations

from dataclasses import replace

from ..core import contract, interval
from ..core.contract import IMPROVED, NOTED, PASS, REGRESSION, UNDETERMINED
from ..core.limits import ARROW, MINUS, Move, format_percent, format_value
from ..core.model import CASE_DRIFT
from ..core.stats import Summary
from ..core.verdict import Scope, Verdict
from ..measure.paths import Figures, Parsers
from .hints import Rerun

PARSER_HINT = "parser regression: check the reasoning and tool-call parsers, not the drafter"
CHAT_DECODE_HINT = ("decode regression on the chat route, not post-processing: check what the "
                    "chat request changes for the server (template, tools, sampling), then the "
                    "drafter")
STREAM_DECODE_HINT = ("the server decodes slower while streaming: a server regression on the "
                      "streaming path, not transport; check the server's stream output (stream "
                      "interval, detokenizer) and the scheduler")
TRANSPORT_LABEL = "transport/client overhead, not a server regression"
# Verdict case ids end with the comparison they judge (the summary lists them by it).
COMPARISONS = (" chat vs native", " chat stream vs native stream", " stream vs non-stream")
# A part explains a gap when it accounts for at least this share of it.
EXPLAINS = 0.5
# A comparison whose figures could not be measured: undetermined with this reason, never a
# pass (the case errors).
UNMEASURED = contract.UNMEASURED
MORE_REPEATS = ("the interval straddles the tolerance, so it is neither a pass nor a fail — "
                "measure the paths again with more rounds (--specperf-max-repeats)")


def more_rounds(rounds: int, max_repeats: int, rerun: Rerun) -> str:
    """The advice of an undetermined path comparison that took ``rounds`` rounds of each path
    (the sampler measures while undetermined, up to ``max_repeats``): a command with more
    rounds allowed, on the run's own server and flags (``rerun``: judge/hints.py)."""
    more = str(max(2 * max_repeats, rounds + 6))
    return (f"the interval straddles the tolerance after {rounds} rounds of each path "
            f"(--specperf-max-repeats {max_repeats}), so it is neither a pass nor a fail — "
            f"measure the paths with more rounds: {rerun('--specperf-max-repeats', more)}")
FIGURE_NAMES = {"tok_s": "tok/s", "decode_tok_s": "server decode tok/s (server timings)",
                "delivery_tok_s": "client delivery tok/s"}


def _ms(value: float) -> str:
    sign = MINUS if value < 0 and round(abs(value)) else "+"
    return f"{sign}{abs(value):.0f} ms" if abs(value) >= 10 else f"{sign}{abs(value):.1f} ms"


def _rate(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}"


def _figure(figs: Figures, key: str) -> float:
    value = figs.get(key)
    return 0.0 if value is None else value


def unmeasured(case_id: str, needed: dict[str, tuple[Figures, ...]], what: str) -> Verdict | None:
    """A verdict saying which figure is missing on which path, or None when all are there."""
    missing = [f"{FIGURE_NAMES.get(key, key)} on the {figs.name} path"
               for key, paths in needed.items() for figs in paths if figs.get(key) is None]
    if not missing:
        return None
    return Verdict(case_id, UNDETERMINED, f"not measured: no {', no '.join(missing)}, so "
                   f"{what} cannot be judged — a missing figure is never a pass; check that the "
                   "server returns its timings (meta_info) or serves /metrics.",
                   reason=UNMEASURED, scope=Scope.PATH)


def _rel_se(summary: Summary) -> float:
    """The relative standard error of a figure's median over its repeats (its spread no
    smaller than CASE_DRIFT: a MAD of a few quantised repeats can be 0)."""
    return interval.median_se(summary, CASE_DRIFT)


def sized(move: Move, base: Summary | None, new: Summary | None) -> Move:
    """``move`` with the standard error and df of its two medians' log ratio (unchanged, a
    point estimate, when either side has fewer than two repeats or no spread known).

    The df are Welch–Satterthwaite's over both sides' spreads (n − 1 each), not the smaller
    side's n − 1: at three repeats a side that is Student's t at 2 df (4.30) where both sides'
    six repeats give about 4 (2.78), and the wider interval left a clean chat route at 3 %
    request noise undetermined against its −10 % limit."""
    if base is None or new is None or min(base.n, new.n) < 2 or not move.base \
            or move.new <= 0 or move.base <= 0:
        return move
    parts = [(_rel_se(side) ** 2, float(side.n - 1)) for side in (base, new)]
    return replace(move, se=interval.se_of(*(v for v, _ in parts)),
                   df=interval.satterthwaite(parts))


def judged(move: Move) -> str:
    """The contract's status of a :func:`sized` move: its 95 % interval against its tolerance
    (the point estimate's status without one)."""
    if abs(move.new - move.base) < move.floor:
        return PASS
    bounds = move.interval()
    if bounds is None:
        return move.status
    return contract.status(contract.Change(move.change, *bounds), move.direction,
                           move.tolerance)


class _Judged:
    """The moves one path verdict judged, sized with their intervals: the verdict's
    ``details`` (each figure's base, new, change, limit and interval), keyed by metric."""

    def __init__(self) -> None:
        self.details: dict[str, dict[str, float]] = {}

    def status(self, move: Move, base: Figures, new: Figures, key: str,
               new_key: str = "") -> str:
        move = sized(move, base.spreads.get(key), new.spreads.get(new_key or key))
        self.details[new_key or key] = move.detail()
        return judged(move)


def _ending(status: str, better: str, advice: str = MORE_REPEATS) -> str:
    """How a comparison's sentence ends for a status other than a regression."""
    if status == NOTED:
        return "a difference beyond its noise but within tolerance: noted"
    if status == IMPROVED:
        return f"{better} beyond tolerance"
    if status == UNDETERMINED:
        return advice
    return "within tolerance"


def _post_text(post_ms: float | None, unit: str) -> str:
    return f"post-processing n/a (not measured) {unit}" if post_ms is None \
        else f"post-processing {_ms(post_ms)} {unit}"


# -- parsers ran --------------------------------------------------------------------------------
def parser_problems(chat: Figures, parsers: Parsers) -> list[str]:
    """Sentences for parsers that did not run or produced broken output (each fails)."""
    problems = []
    if chat.reasoning_missing:
        problems.append(
            f"reasoning_content was missing in {chat.reasoning_missing} of {chat.n} {chat.name} "
            f"responses although the server runs reasoning parser {parsers.reasoning} — the "
            "reasoning parser did not run: check the server's --reasoning-parser and that "
            "separate_reasoning reaches it.")
    if chat.tool_call_problem:
        problems.append(
            f"the tool-call parser {parsers.tool_call} returned {chat.tool_call_problem} on "
            f"the {chat.name} route — {PARSER_HINT}.")
    return problems


def _parsers_ran(chat: Figures, parsers: Parsers) -> str:
    parts = []
    if parsers.reasoning:
        parts.append(f"reasoning parser {parsers.reasoning} ran (reasoning_content in every "
                     "response)")
    if parsers.tool_call:
        if chat.tool_calls_missing:
            parts.append(f"no tool call in {chat.tool_calls_missing} of {chat.n} responses (the "
                         f"model chose not to call), so tool-call parser {parsers.tool_call} "
                         "was checked only where it was used")
        else:
            parts.append(f"tool-call parser {parsers.tool_call} ran (well-formed calls)")
    return "; ".join(parts)


def _failed(case_id: str, message: str, problems: list[str]) -> Verdict:
    """A regression of the chat route against the native one: the parser path's."""
    return Verdict(case_id, REGRESSION, " ".join([message, *problems]) if message else
                   " ".join(problems), factor="parser", scope=Scope.PATH)


# -- chat vs native (non-streaming) --------------------------------------------------------------
def judge_parser(case_id: str, native: Figures, chat: Figures, parsers: Parsers,
                 tolerances: dict[str, float], output_tokens: int, *,
                 advice: str = MORE_REPEATS) -> Verdict:
    """The chat route with parsers against the native route, same case, interleaved;
    ``advice`` ends an undetermined one (:func:`more_rounds`)."""
    j = _Judged()
    verdict = _judge_parser(j, case_id, native, chat, parsers, tolerances, output_tokens,
                            advice=advice)
    return replace(verdict, details=j.details)


def _judge_parser(j: _Judged, case_id: str, native: Figures, chat: Figures, parsers: Parsers,
                  tolerances: dict[str, float], output_tokens: int, *,
                  advice: str = MORE_REPEATS) -> Verdict:
    missing = unmeasured(case_id, {"tok_s": (native, chat)}, "the chat route against the native")
    if missing is not None:
        return missing
    tok = Move("tok_s", _figure(native, "tok_s"), _figure(chat, "tok_s"),
               tolerances["tok_s"], label="chat tok/s")
    problems = parser_problems(chat, parsers)
    decode = _decode_cmp(native, chat, tolerances)
    step = _step_cmp(native, chat, tolerances)
    post_a, post_b = native.get("post_ms"), chat.get("post_ms")
    post = None if post_a is None or post_b is None else post_b - post_a
    note = " (chat server timings from /metrics: no meta_info)" \
        if chat.timings_from == "metrics" else ""
    found = [j.status(tok, native, chat, "tok_s")]
    if found[0] == REGRESSION:
        return _failed(case_id, _parser_gap(tok, decode, step, post, native, chat,
                                            output_tokens) + note, problems)
    if step is not None:
        found.append(j.status(step, native, chat, "step_ms"))
    if found[-1] == REGRESSION and step is not None:
        message = (f"{step.text(vs=' vs native', limit=True)} while {tok.text(vs=' vs native')} "
                   f"stayed within its limit — {CHAT_DECODE_HINT}.")
        return _failed(case_id, message, problems)
    steps = f"; step time {format_value('step_ms', step.base)} {ARROW} " \
        f"{format_value('step_ms', step.new)} ms" if step is not None else ""
    message = (f"{tok.text(vs=' vs native', limit=True)}{steps}; "
               f"{_post_text(post, 'per response')}{note}; {_parsers_ran(chat, parsers)}")
    if problems:
        return _failed(case_id, "", problems)
    status = contract.combine(found)
    return Verdict(case_id, status, f"{message} — {_ending(status, 'faster than native', advice)}.",
                   scope=Scope.PATH)


def _decode_cmp(base: Figures, new: Figures, tolerances: dict[str, float]) -> Move | None:
    a, b = base.get("decode_tok_s"), new.get("decode_tok_s")
    if a is None or b is None:
        return None
    return Move("tok_s", a, b, tolerances["decode_tok_s"], label="server decode",
                unit=" tok/s")


def _step_cmp(base: Figures, new: Figures, tolerances: dict[str, float]) -> Move | None:
    a, b = base.get("step_ms"), new.get("step_ms")
    if a is None or b is None:
        return None
    return Move("step_ms", a, b, tolerances["step_ms"], label="chat step time")


def _parser_gap(tok: Move, decode: Move | None, step: Move | None, post: float | None,
                native: Figures, chat: Figures, output_tokens: int) -> str:
    """Why chat tok/s fell: decode, post-processing, both or neither."""
    head = tok.text(vs=" vs native", limit=True)
    if decode is None:
        return (f"{head}: the chat route reported no server timings (no meta_info and no "
                "/metrics), so decode and post-processing cannot be told apart — check the "
                "reasoning and tool-call parsers first, then the decode.")
    wall_ms = 1000.0 * output_tokens * (1 / tok.new - 1 / tok.base)
    decode_ms = 1000.0 * (output_tokens - 1) * (1 / decode.new - 1 / decode.base)
    post_text = _post_text(post, "per response")
    post_ms = 0.0 if post is None else post
    slower_decode = decode.regressed or (step is not None and step.regressed)
    post_explains = post_ms > 0 and post_ms >= EXPLAINS * wall_ms
    decode_explains = slower_decode and decode_ms >= EXPLAINS * wall_ms
    if post_explains and not slower_decode:
        return f"{head}: {decode.text(noise=True)}; {post_text} explains it — {PARSER_HINT}."
    if decode_explains and not post_explains:
        return f"{head}: {decode.text()} explains it; {post_text} — {CHAT_DECODE_HINT}."
    if slower_decode and post_ms > 0:
        return (f"{head}: {decode.text()} and {post_text} both add to it — decode and "
                f"post-processing regression on the chat route: check the reasoning and "
                f"tool-call parsers, then what the chat request changes for the server.")
    return (f"{head}: {decode.text(noise=True)}; {post_text} — neither decode nor "
            "post-processing explains it (transport or client overhead?).")


# -- stream vs non-stream (same route) ----------------------------------------------------------
def judge_stream(case_id: str, plain: Figures, stream: Figures,
                 tolerances: dict[str, float], *, advice: str = MORE_REPEATS) -> Verdict:
    """A stream against the same request unstreamed: the server's decode must not slow."""
    j = _Judged()
    verdict = _judge_stream(j, case_id, plain, stream, tolerances, advice=advice)
    return replace(verdict, details=j.details)


def _judge_stream(j: _Judged, case_id: str, plain: Figures, stream: Figures,
                  tolerances: dict[str, float], *, advice: str = MORE_REPEATS) -> Verdict:
    missing = unmeasured(case_id, {"decode_tok_s": (plain, stream)},
                         "whether the server decodes slower while streaming")
    if missing is not None:
        return replace(missing, message=f"{missing.message} Client side: "
                       f"{_stream_tail(plain, stream)}.")
    decode = _decode_cmp(plain, stream, tolerances)
    assert decode is not None
    tail = _stream_tail(plain, stream)
    # Streaming cannot change what the drafter proposes, only what a verify step costs; the
    # two paths send different prompts (a nonce each), whose acceptance differs by whole
    # steps (64 padding tokens: 8 or 9), so decode tok/s would judge the prompts. Step time
    # judges the path; decode tok/s only where the server reports no verify steps.
    step = _step_cmp(plain, stream, tolerances)
    judged_by, key = (replace_label(step, "server step time while streaming"), "step_ms") \
        if step is not None else (replace_label(decode, "server decode while streaming"),
                                  "decode_tok_s")
    found = [j.status(judged_by, plain, stream, key)]
    if found[0] == REGRESSION:
        return Verdict(case_id, REGRESSION, f"{judged_by.text(vs=' vs non-streaming', limit=True)}"
                       f" — {STREAM_DECODE_HINT}.", factor="stream", scope=Scope.PATH)
    delivery = stream.get("delivery_tok_s")
    gap = Move("tok_s", decode.new, delivery or 0.0, tolerances["tok_s"],
               label="client delivery")
    if delivery is not None:
        found.append(j.status(gap, stream, stream, "decode_tok_s", "delivery_tok_s"))
    if found[-1] == REGRESSION and delivery is not None:
        return Verdict(case_id, REGRESSION, (
            f"the stream delivered {delivery:.1f} tok/s to the client against a server decode "
            f"of {decode.new:.1f} tok/s ({format_percent(gap.change)}) — {TRANSPORT_LABEL}: "
            f"the server decoded at its non-streaming pace "
            f"({judged_by.text(vs=' vs non-streaming', noise=True)}); the chunks reached the "
            f"client late: check proxies, tunnels and the network between client and "
            f"server. {tail}."), factor="transport", scope=Scope.PATH)
    status = contract.combine(found)
    return Verdict(case_id, status, f"{judged_by.text(vs=' vs non-streaming')}; {tail}; "
                   f"client delivery {_rate(delivery)} tok/s vs server decode "
                   f"{decode.new:.1f} tok/s — "
                   f"{_ending(status, 'faster than non-streaming', advice)}.", scope=Scope.PATH)


def replace_label(cmp: Move, label: str) -> Move:
    return replace(cmp, label=label)


def _stream_tail(plain: Figures, stream: Figures) -> str:
    a, b = plain.get("tok_s"), stream.get("tok_s")
    change = format_percent(b / a - 1.0) if a and b is not None else "n/a"
    ttft = stream.get("ttft_ms")
    parts = [f"stream tok/s {_rate(b)} vs {_rate(a)} non-streaming ({change})",
             f"TTFT {'n/a' if ttft is None else f'{ttft:.0f} ms'}"]
    cps = stream.get("chunks_per_step")
    if cps is not None:
        parts.append(f"{cps:.2f} chunks per verify step")
    gap, itl = stream.get("gap_ms"), stream.get("itl_ms")
    if gap is not None:
        parts.append(f"ITL {gap:.1f} ms per chunk" + (f", {itl:.1f} ms per token"
                                                      if itl is not None else ""))
    return "; ".join(parts)


# -- chat stream vs native stream -------------------------------------------------------------
def judge_chat_stream(case_id: str, native: Figures, chat: Figures, parsers: Parsers,
                      tolerances: dict[str, float], output_tokens: int, *,
                      advice: str = MORE_REPEATS) -> Verdict:
    """The chat stream with parsers against the native stream on the same transport."""
    j = _Judged()
    verdict = _judge_chat_stream(j, case_id, native, chat, parsers, tolerances,
                                 output_tokens, advice=advice)
    return replace(verdict, details=j.details)


def _judge_chat_stream(j: _Judged, case_id: str, native: Figures, chat: Figures, parsers: Parsers,
                       tolerances: dict[str, float], output_tokens: int, *,
                       advice: str = MORE_REPEATS) -> Verdict:
    missing = unmeasured(case_id, {"delivery_tok_s": (native, chat)},
                         "the chat stream against the native stream")
    if missing is not None:
        return missing
    problems = parser_problems(chat, parsers)
    delivery = Move("tok_s", _figure(native, "delivery_tok_s"),
                    _figure(chat, "delivery_tok_s"), tolerances["tok_s"],
                    label="chat stream delivery", unit=" tok/s")
    decode = _decode_cmp(native, chat, tolerances)
    head = delivery.text(vs=" vs the native stream", limit=True)
    found = [] if decode is None else [j.status(decode, native, chat, "decode_tok_s")]
    if found and found[0] == REGRESSION and decode is not None:
        return _failed(case_id, f"{head}: {decode.text()} explains it — {CHAT_DECODE_HINT}.",
                       problems)
    found.append(j.status(delivery, native, chat, "delivery_tok_s"))
    commit = chat.get("avg_commit") or native.get("avg_commit")
    steps = (output_tokens - 1) / commit if commit else 0.0
    spans = chat.get("span_ms"), native.get("span_ms")
    per_step = None if None in spans or not steps else \
        (_figure(chat, "span_ms") - _figure(native, "span_ms")) / steps
    post = _post_text(per_step, "per verify step")
    if found[-1] == REGRESSION:
        if decode is None:
            return _failed(case_id, (
                f"{head}: the chat stream reports no server decode (no /metrics), so this is "
                f"post-processing or decode on the chat route ({post}) — run the non-streaming "
                "parser case, which separates them."), problems)
        return _failed(case_id, f"{head}: {decode.text(noise=True)}; {post} explains it — "
                       f"{PARSER_HINT}.", problems)
    if problems:
        return _failed(case_id, "", problems)
    status = contract.combine(found)
    both_slow = [f for f in (native, chat) if _late(f, tolerances["tok_s"])]
    if len(both_slow) == 2:
        return Verdict(case_id, status, (
            f"chat and native streams both deliver {_rate(chat.get('delivery_tok_s'))} and "
            f"{_rate(native.get('delivery_tok_s'))} tok/s against a server decode of "
            f"{_rate(chat.get('decode_tok_s'))} and {_rate(native.get('decode_tok_s'))} tok/s — "
            f"{TRANSPORT_LABEL} and not the parsers: both routes lose it alike; "
            f"{delivery.text(vs=' vs the native stream', limit=True)}."), scope=Scope.PATH)
    return Verdict(case_id, status, f"{head}; {post}; {_parsers_ran(chat, parsers)} — "
                   f"{_ending(status, 'faster than the native stream', advice)}.", scope=Scope.PATH)


def _late(figs: Figures, tolerance: float) -> bool:
    """Whether a stream's chunks reached the client clearly slower than the server decoded."""
    delivery, decode = figs.get("delivery_tok_s"), figs.get("decode_tok_s")
    return delivery is not None and decode is not None and delivery < decode * (1 - tolerance)
