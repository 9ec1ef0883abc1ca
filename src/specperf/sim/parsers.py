"""Kimi K2 raw output, and SGLang's ``kimi_k2`` reasoning and tool-call parsing of it.

Markers (facts from sgl-project/sglang ``python/sglang/srt/parser/reasoning_parser.py``
``KimiK2Detector`` and ``python/sglang/srt/function_call/kimik2_detector.py``): thinking is
``<think>`` ... ``</think>``; a tool call is ``<|tool_calls_section_begin|>``
``<|tool_call_begin|>functions.{name}:{index}<|tool_call_argument_begin|>{json}``
``<|tool_call_end|>`` ``<|tool_calls_section_end|>``. The reasoning parser is not forced (text
is reasoning only after ``<think>``), and a tool-call section also ends the reasoning.

Raw output (when the profile's ``reasoning_parser`` is set, on every route): of a request's
N = max_new_tokens, position 0 is ``<think>``, position T = max(2, N * 6 // 10) is
``</think>`` (so about the first 60 % is thinking), the rest is the answer. Requests shorter
than 4 tokens do not think. A chat request with ``tools`` (tool parser set, ``tool_choice``
not "none") ends its answer with one call of the first tool (or the named one): the section
fills the last positions (T moves earlier if needed; no call when N is too small), and
without ignore_eos the model stops with EOS right after the section, one token short of N.
Each marker is one token. Marker and tool-call tokens are scripted: they take positions in
the sequence (token counts are unchanged) but never enter the repetition statistics nor the
continuation, so acceptance is as without them.

Arguments: a JSON object with each ``required`` key of the tool's ``parameters``, valued by
its declared type (string ``"sim"``, or the first ``enum`` value; integer 1; number 1.5;
boolean true; array []; object {}; anything else null).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from specperf.sim.tokenizer import EOS_ID, Tokenizer, piece_id

THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"
SECTION_BEGIN = "<|tool_calls_section_begin|>"
SECTION_END = "<|tool_calls_section_end|>"
CALL_BEGIN = "<|tool_call_begin|>"
ARGUMENT_BEGIN = "<|tool_call_argument_begin|>"
CALL_END = "<|tool_call_end|>"
MARKERS = (THINK_OPEN, THINK_CLOSE, SECTION_BEGIN, SECTION_END, CALL_BEGIN, ARGUMENT_BEGIN,
           CALL_END)
MIN_THINKING_TOKENS = 4
_CALL_ID_RE = re.compile(r"^(?:functions\.)?(?P<name>[\w.]+):(?P<index>\d+)$")
_IDS = {marker: piece_id(marker) for marker in MARKERS}
_TYPE_VALUES: dict[str, Any] = {"string": "sim", "integer": 1, "number": 1.5, "boolean": True,
                                "array": [], "object": {}}


class ToolChoiceError(ValueError):
    """A tools / tool_choice combination SGLang rejects with a 400."""


@dataclass(frozen=True)
class ToolCallPlan:
    """The call the simulated model will make: function name and JSON arguments."""

    name: str
    arguments: str


def plan_tool_call(tools: object, tool_choice: object) -> ToolCallPlan | None:
    """The call for a request's ``tools`` and ``tool_choice`` (None: no call)."""
    if tools is None or tools == []:
        if tool_choice == "required":
            raise ToolChoiceError("Tools cannot be empty if tool choice is set to required.")
        return None
    functions = _functions(tools)
    if tool_choice == "none":
        return None
    chosen = functions[0]
    if isinstance(tool_choice, Mapping):
        wanted = (tool_choice.get("function") or {}).get("name")
        matches = [f for f in functions if f.get("name") == wanted]
        if not matches:
            raise ToolChoiceError(f"Tool '{wanted}' not found in tools list.")
        chosen = matches[0]
    return ToolCallPlan(str(chosen["name"]), json.dumps(_arguments(chosen), ensure_ascii=False))


def output_script(tokenizer: Tokenizer, max_new: int, thinking: bool,
                  call: ToolCallPlan | None, ignore_eos: bool) -> dict[int, int]:
    """Scripted output positions -> token ids (layout in the module docstring)."""
    script: dict[int, int] = {}
    tail = _call_tokens(tokenizer, call) if call is not None else []
    if tail and not ignore_eos:
        tail.append(EOS_ID)  # the model ends its turn after the call
    if len(tail) + (3 if thinking else 1) > max_new:
        tail = []  # too short for the call: the answer is plain text
    for offset, token in enumerate(tail):
        script[max_new - len(tail) + offset] = token
    if thinking and max_new >= MIN_THINKING_TOKENS:
        close = min(max(2, max_new * 6 // 10), max_new - len(tail) - 1)
        if close >= 1:
            script[0] = _IDS[THINK_OPEN]
            script[close] = _IDS[THINK_CLOSE]
    return script


def register_markers(tokenizer: Tokenizer) -> None:
    """Teach the tokenizer the markers as single (special) tokens."""
    for marker in MARKERS:
        tokenizer.add_special(marker)


@dataclass
class ParsedDelta:
    """What one batch of new tokens parses into."""

    reasoning: str = ""
    content: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)


class OutputParser:
    """Incremental parse of one request's output tokens, as SGLang's two detectors do.

    ``reasoning``: split thinking from the answer (reasoning parser on and
    ``separate_reasoning``); ``tools``: parse tool calls (tool parser on, request has tools).
    """

    def __init__(self, tokenizer: Tokenizer, reasoning: bool, tools: bool) -> None:
        self._tokenizer = tokenizer
        self._reasoning = reasoning
        self._tools = tools
        self._state = "text"
        self._opened = False
        self._call_id = ""
        self._calls: list[dict[str, Any]] = []

    @property
    def has_tool_calls(self) -> bool:
        return bool(self._calls)

    def feed(self, ids: Sequence[int]) -> ParsedDelta:
        """Parse the next tokens; returns the reasoning, content and tool-call deltas."""
        delta = ParsedDelta()
        for token in ids:
            self._step(token, self._tokenizer.piece(token), delta)
        return delta

    def message(self, ids: Sequence[int]) -> tuple[str | None, str, list[dict[str, Any]] | None]:
        """Non-streaming: (reasoning_content, content, tool_calls) of a whole output."""
        delta = self.feed(ids)
        reasoning = delta.reasoning if self._opened and delta.reasoning else None
        return reasoning, delta.content, ([dict(c) for c in self._calls] or None)

    def _step(self, token: int, piece: str, delta: ParsedDelta) -> None:
        state = self._state
        if self._reasoning and not self._opened and token == _IDS[THINK_OPEN]:
            self._opened, self._state = True, "reasoning"
        elif state == "reasoning":
            if token == _IDS[THINK_CLOSE]:
                self._state = "text"
            elif self._tools and token == _IDS[SECTION_BEGIN]:
                self._state = "section"  # Kimi K2 may open a tool call without </think>
            else:
                delta.reasoning += piece
        elif self._tools and state != "text":
            self._tool_step(token, piece, delta)
        elif self._tools and token == _IDS[SECTION_BEGIN]:
            self._state = "section"
        else:
            delta.content += piece

    def _tool_step(self, token: int, piece: str, delta: ParsedDelta) -> None:
        state = self._state
        if state == "section":
            if token == _IDS[CALL_BEGIN]:
                self._state, self._call_id = "call_id", ""
            elif token == _IDS[SECTION_END]:
                self._state = "text"
        elif state == "call_id":
            if token == _IDS[ARGUMENT_BEGIN]:
                self._open_call(delta)
            else:
                self._call_id += piece
        elif state == "arguments":
            if token == _IDS[CALL_END]:
                self._state = "section"
            elif self._calls:
                self._calls[-1]["function"]["arguments"] += piece
                self._argument_delta(delta, piece)
        elif token == _IDS[CALL_END]:  # "skip": an unparsable call id, dropped as SGLang does
            self._state = "section"

    def _open_call(self, delta: ParsedDelta) -> None:
        match = _CALL_ID_RE.match(self._call_id.strip())
        if match is None:
            self._state = "skip_arguments"
            return
        self._state = "arguments"
        index = len(self._calls)
        name = match.group("name")
        # SGLang's kimi_k2 ids follow the model: functions.{name}:{index}.
        call_id = f"functions.{name}:{index}"
        self._calls.append({"id": call_id, "index": index, "type": "function",
                            "function": {"name": name, "arguments": ""}})
        delta.tool_calls.append({"id": call_id, "index": index, "type": "function",
                                 "function": {"name": name, "arguments": ""}})

    def _argument_delta(self, delta: ParsedDelta, piece: str) -> None:
        index = len(self._calls) - 1
        last = delta.tool_calls[-1] if delta.tool_calls else None
        if last is not None and last["id"] is None and last["index"] == index:
            last["function"]["arguments"] += piece
        else:
            delta.tool_calls.append({"id": None, "index": index, "type": "function",
                                     "function": {"name": None, "arguments": piece}})


def _functions(tools: object) -> list[Mapping[str, Any]]:
    if not isinstance(tools, list):
        raise ToolChoiceError("tools must be a list of tool objects")
    functions = []
    for i, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, Mapping) else None
        if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
            raise ToolChoiceError(f"Tool {i} must be {{'type': 'function', 'function': "
                                  "{'name': ..., 'parameters': ...}}")
        functions.append(function)
    return functions


def _arguments(function: Mapping[str, Any]) -> dict[str, Any]:
    parameters = function.get("parameters")
    if not isinstance(parameters, Mapping):
        return {}
    properties = parameters.get("properties")
    properties = properties if isinstance(properties, Mapping) else {}
    required = parameters.get("required")
    keys = [k for k in required if isinstance(k, str)] if isinstance(required, list) else []
    return {key: _value(properties.get(key)) for key in keys}


def _value(schema: object) -> Any:
    if not isinstance(schema, Mapping):
        return None
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        return enum[0]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    return _TYPE_VALUES.get(str(kind))


def _call_tokens(tokenizer: Tokenizer, call: ToolCallPlan) -> list[int]:
    head = tokenizer.encode(f"functions.{call.name}:0", add_special_tokens=False)
    arguments = tokenizer.encode(call.arguments, add_special_tokens=False)
    return [_IDS[SECTION_BEGIN], _IDS[CALL_BEGIN], *head, _IDS[ARGUMENT_BEGIN], *arguments,
            _IDS[CALL_END], _IDS[SECTION_END]]
