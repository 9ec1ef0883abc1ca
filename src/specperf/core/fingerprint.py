"""A deployment's fingerprint as data: its keys' labels, the differences between two, the
deployment name it gives a baseline, and the pinned-acceptance note.

The probe builds a fingerprint from the server (:mod:`specperf.servers.fingerprint`); every
room that reads one from a baseline or a record (baselines, record, views, plugin) reads it
with these functions, so none of them needs the servers room to do it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Protocol

from .limits import ARROW


class RunNaming(Protocol):
    """What naming a run's deployment reads of its settings (settings.config.Settings)."""

    @property
    def deployment(self) -> str | None: ...
    @property
    def sim_profile(self) -> str: ...
    @property
    def fingerprint(self) -> Mapping[str, str]: ...

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


def deployment_for(deployment: str | None, sim_profile: str, server: Mapping[str, Any]) -> str:
    """:func:`deployment_name` from the values a results document keeps of its settings."""
    if deployment:
        return deployment
    fingerprint = server.get("fingerprint") or {}
    if server.get("simulated"):
        # Simulator baselines must never be mistaken for the real box's.
        return f"sim-{fingerprint.get('sim_profile') or sim_profile}"
    return deployment_slug(fingerprint)


def deployment_name(settings: RunNaming, server: Mapping[str, Any]) -> str:
    """The baseline deployment of a run: --deployment, else named by the server it measured."""
    declared = with_declared(server.get("fingerprint") or {}, settings.fingerprint)
    return deployment_for(settings.deployment, settings.sim_profile,
                          {**server, "fingerprint": declared})
