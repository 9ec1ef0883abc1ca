"""A server's fingerprint: what identifies a deployment, names its baselines, and changes
when a drafter, kernel or parser deploy changes it.

Built once by the probe from ``/server_info`` and ``/model_info``; compared with a baseline's
(or production's, in A/B mode) and stated at the top of every report when it differs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from . import vllm

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
