"""A server's fingerprint: what identifies a deployment, names its baselines, and changes
when a drafter, kernel or parser deploy changes it.

Built once by the probe from ``/server_info`` and ``/model_info``; compared with a baseline's
(or production's, in A/B mode) and stated at the top of every report when it differs.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..core.limits import ARROW
from . import vllm

if TYPE_CHECKING:
    from ..settings.config import Settings

# server_info key → fingerprint key. The fingerprint keys baselines and heads every report.
_FINGERPRINT = {
    "speculative_algorithm": "speculative_algorithm",
    "speculative_draft_model_path": "draft_model",
    "speculative_ddtree_budget": "ddtree_budget",
    "speculative_num_steps": "num_steps",
    "speculative_num_draft_tokens": "num_draft_tokens",
    "attention_backend": "attention_backend",
    "decode_attention_backend": "decode_attention_backend",
    "page_size": "page_size",
    "tp_size": "tp_size",
    "version": "version",
}


def fingerprint_of(server_info: dict[str, Any], model_info: dict[str, Any],
                   simulated: bool) -> dict[str, Any]:
    """The fingerprint of a server from its /server_info and /model_info."""
    fp: dict[str, Any] = {
        "model": server_info.get("served_model_name") or model_info.get("served_model_name")
        or model_info.get("model_path") or server_info.get("model_path"),
        "simulated": simulated,
    }
    for key, name in _FINGERPRINT.items():
        fp[name] = server_info.get(key)
    if "vllm_config" in server_info:  # vLLM dev mode: one repr string (servers/vllm.py)
        fp.update(vllm.fingerprint_fields(server_info))
    # A parser deploy is one of the two things the gate judges: it shows as a change here.
    fp["reasoning_parser"] = model_info.get("reasoning_parser") or \
        server_info.get("reasoning_parser")
    fp["tool_call_parser"] = model_info.get("tool_call_parser") or \
        server_info.get("tool_call_parser")
    return fp


def step_limit(fp: Mapping[str, Any]) -> tuple[int, str] | None:
    """The most draft tokens one verify step can propose, per server kind, and where the
    number came from; None when the fingerprint does not say (then only the bounds that need
    no draft length apply: measure/sample.py ``check_possible``).

    vLLM: ``num_speculative_tokens`` k. SGLang: ``speculative_num_draft_tokens``, the tokens
    one verify pass checks (a chain's depth + 1; a tree's node count, which bounds its depth
    + 1 too), else a DDTree's budget (nodes, so depth + 1 ≤ budget + 1). llama.cpp: the
    draft's n_max when /props reports it (``speculative.n_max``); this build reports none,
    and ``--spec-draft-n-max`` (default 3) is only the draft model's, ngram-mod drafts 64.
    """
    for key, name, where in _LIMITS:
        value = fp.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value, f"{name} {value}, from {where}"
    return None


# fingerprint key, the server's own name for it, where the fingerprint read it: in order.
_LIMITS = (("num_speculative_tokens", "num_speculative_tokens", "/server_info"),
           ("num_draft_tokens", "speculative_num_draft_tokens", "/server_info"),
           ("ddtree_budget", "speculative_ddtree_budget", "/server_info"),
           ("draft_n_max", "speculative.n_max", "/props"))


# What a fingerprint key says when the server runs the thing but does not tell what it is
# (llama-server's draft model: servers/llamacpp.py). Compared as unknown; the user may declare
# the value (--specperf-fingerprint draft_model=FILE, :func:`with_declared`).
NOT_REPORTED = "not reported by the server"


def with_declared(fingerprint: Mapping[str, Any], declared: Mapping[str, str]) -> dict[str, Any]:
    """``fingerprint`` with what the user declared of the server (--specperf-fingerprint)
    in place of what the server reports, or does not."""
    return {**fingerprint, **declared}


FINGERPRINT_LABELS = {
    "model": "model", "speculative_algorithm": "speculative algorithm",
    "draft_model": "draft model", "ddtree_budget": "DDTree budget",
    "attention_backend": "attention backend", "page_size": "page size",
    "tp_size": "tensor parallel size", "version": "server version", "simulated": "simulated",
    "reasoning_parser": "reasoning parser", "tool_call_parser": "tool-call parser",
    "acceptance_pinned": "acceptance pinned (synthetic)",
}
# The fingerprint key of a server whose acceptance is dialled (servers/pinned.py): its flags.
PINNED_KEY = "acceptance_pinned"
PINNED_NOTE = "acceptance pinned (synthetic): step time and context fit judged only"


def pinned_flags(fingerprint: Mapping[str, Any]) -> str | None:
    """The synthetic-acceptance flags a fingerprint records, None when acceptance is real
    (or unknown)."""
    value = fingerprint.get(PINNED_KEY)
    return value if isinstance(value, str) and value else None


def pinned_line(fingerprint: Mapping[str, Any]) -> list[str]:
    """The run header's line for a server with pinned acceptance (none otherwise)."""
    flags = pinned_flags(fingerprint)
    if flags is None:
        return []
    return [f"{PINNED_NOTE} (the server runs with {flags}; prefill is judged too, avg commit, "
            "tok/s and exact acceptance are not)."]


def deployment_slug(fingerprint: Mapping[str, Any]) -> str:
    """A readable directory name from model, speculative algorithm and draft model."""
    parts = [_slug_part(fingerprint.get(k)) for k in
             ("model", "speculative_algorithm", "draft_model")]
    slug = "-".join(p for p in parts if p)
    return slug or "unknown-deployment"


def _slug_part(value: Any) -> str:
    if value is None or value == NOT_REPORTED:
        return ""
    # Paths and hub ids differ in their prefixes only; the last component names the model.
    base = str(value).rstrip("/").rsplit("/", 1)[-1].lower()
    return re.sub(r"-{2,}", "-", re.sub(r"[^a-z0-9.-]", "-", base)).strip("-.")


def fingerprint_differences(baseline_fp: Mapping[str, Any],
                            current_fp: Mapping[str, Any]) -> list[str]:
    """'draft model: a → b' for each key whose value differs.

    None means unknown, and so does :data:`NOT_REPORTED`: the two are not a difference. A
    key only one side carries at all (a hand-written 'gpus' note, or one a newer suite
    records) cannot be compared and is not reported.
    """
    keys = list(FINGERPRINT_LABELS) + sorted(set(baseline_fp) - set(FINGERPRINT_LABELS))
    out = []
    for key in keys:
        if key not in current_fp or key not in baseline_fp:
            continue
        old, new = baseline_fp.get(key), current_fp.get(key)
        if old != new and not (_unknown(old) and _unknown(new)):
            label = FINGERPRINT_LABELS.get(key, key.replace("_", " "))
            out.append(f"{label}: {_fp_value(old)} {ARROW} {_fp_value(new)}")
    return out


def _unknown(value: Any) -> bool:
    return value is None or value == NOT_REPORTED


def _fp_value(value: Any) -> str:
    if value is None:
        return "unknown"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def deployment_name(settings: Settings, server: Mapping[str, Any]) -> str:
    """The baseline deployment of a run: --deployment, else named by the server it measured."""
    declared = with_declared(server.get("fingerprint") or {}, settings.fingerprint)
    return deployment_for(settings.deployment, settings.sim_profile,
                          {**server, "fingerprint": declared})


def deployment_for(deployment: str | None, sim_profile: str, server: Mapping[str, Any]) -> str:
    """:func:`deployment_name` from the values a results document keeps of its settings."""
    if deployment:
        return deployment
    fingerprint = server.get("fingerprint") or {}
    if server.get("simulated"):
        # Simulator baselines must never be mistaken for the real box's.
        return f"sim-{fingerprint.get('sim_profile') or sim_profile}"
    return deployment_slug(fingerprint)
