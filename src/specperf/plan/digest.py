"""The request digest: everything on the client's side that shapes what the server decodes.

Sampling parameters (as the route sends them: temperature, output length, ignore_eos, …),
the route, the chat template's tokens, the output length and each text class's source.
It is stored in the baseline; a run whose digest differs refuses to compare and names the
difference, so a client-side change (another temperature, another output length) never
passes for a server regression — a changed default temperature once looked exactly like an
acceptance regression.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..core.limits import ARROW
from . import reuse
from .workload import TextClass

# Body keys that carry the prompt or the request's identity, not how it is decoded.
_NOT_SAMPLING = frozenset({"text", "input_ids", "prompt", "messages", "rid", "stream",
                           "model"})
_CLASS_SAMPLE_CHARS = 4000
_NAMES = {"temperature": "temperature", "max_new_tokens": "output length",
          "max_tokens": "output length", "ignore_eos": "ignore_eos"}


def class_digest(text_class: TextClass) -> str:
    """The identity of a text class's source: its generated text, suffix and kind."""
    source = f"{text_class.kind}\0{text_class.body(_CLASS_SAMPLE_CHARS)}\0{text_class.suffix}"
    return reuse.digest(source.encode())


def request_digest(request: tuple[str, Mapping[str, Any]], output_tokens: int,
                   template_tokens: int | None, classes: Mapping[str, TextClass]
                   ) -> dict[str, Any]:
    """The digest of this run's requests (readable: a baseline diff shows what moved).
    ``request``: the route and body of an empty prompt as the run sends it."""
    path, body = request
    sampling = {k: v for k, v in body.items() if k not in _NOT_SAMPLING and k !=
                "sampling_params"}
    sampling.update(body.get("sampling_params") or {})
    return {"route": path, "sampling": dict(sorted(sampling.items())),
            "output_tokens": output_tokens, "chat_template_tokens": template_tokens,
            "text_classes": {name: class_digest(tc) for name, tc in sorted(classes.items())}}


def differences(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """What changed from ``old`` to ``new``, one phrase each ("temperature 0 → 0.7")."""
    out = []
    if old.get("route") != new.get("route"):
        out.append(f"route {old.get('route')} {ARROW} {new.get('route')}")
    if old.get("output_tokens") != new.get("output_tokens"):
        out.append(f"output length {old.get('output_tokens')} {ARROW} "
                   f"{new.get('output_tokens')} tokens")
    out += _sampling_changes(old.get("sampling") or {}, new.get("sampling") or {})
    if old.get("chat_template_tokens") != new.get("chat_template_tokens"):
        out.append(f"chat template tokens {old.get('chat_template_tokens')} {ARROW} "
                   f"{new.get('chat_template_tokens')}")
    before, after = old.get("text_classes") or {}, new.get("text_classes") or {}
    out += [f"the source of text class {name!r}" for name in sorted(set(before) & set(after))
            if before[name] != after[name]]
    return out


def _sampling_changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    out = []
    for key in sorted(set(old) | set(new)):
        if old.get(key) == new.get(key) or _NAMES.get(key) == "output length":
            continue  # output length is named once, from output_tokens
        shown = [_show(d.get(key), key in d) for d in (old, new)]
        out.append(f"{_NAMES.get(key, key)} {shown[0]} {ARROW} {shown[1]}")
    return out


def _show(value: Any, present: bool) -> str:
    if not present:
        return "(unset)"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def refusal(baseline_name: str, changes: list[str]) -> str:
    """The one sentence a run that cannot compare says."""
    return (f"this run's requests differ from those of baseline {baseline_name} "
            f"({'; '.join(changes)}): a client-side change is no server regression, so the "
            f"run refuses to compare — measure with the baseline's settings, or write a new "
            f"version with --specperf-update-baselines.")
