"""Prompt nonces: the unique lead that keeps every measured prompt out of the prefix cache.

Every measured prompt starts ``run <12 digits>: `` after the special tokens. A random nonce
(:func:`new_nonce`) is new every time; a derived one (:func:`derived_nonce`) is the same for
a case and repeat in every run of a baseline version, so exact acceptance can compare paths
(:mod:`specperf.plan.reuse`).
"""

from __future__ import annotations

import hashlib
import secrets

from .workload import Tokenizer

NONCE_LEAD = "run "
# Leading digits of two random nonces often match; a token or two of chance overlap.
NONCE_CHANCE = 2


def new_nonce() -> str:
    """A prompt's unique lead. Digits only: a fixed-length number tokenizes to the same
    count every time, which calibrated prompts (no /tokenize) rely on."""
    return f"{NONCE_LEAD}{secrets.randbelow(10**12):012d}: "


def derived_nonce(seed: str, case_id: str, repeat: int) -> str:
    """The lead of repeat ``repeat`` of a case under a baseline version's prompt seed: the
    same in every run that uses the seed (same digits-only shape as :func:`new_nonce`)."""
    key = f"{seed}\0{case_id}\0{repeat}".encode()
    number = int.from_bytes(hashlib.sha256(key).digest()[:8], "big") % 10**12
    return f"{NONCE_LEAD}{number:012d}: "


# Without a tokenizer route the lead cannot be counted: a generous bound (specials, "run").
UNTOKENIZED_PREFIX = 8


def shared_prefix(tokenizer: Tokenizer | None) -> int:
    """Tokens every measured prompt may share with an earlier one: specials, nonce lead."""
    if tokenizer is None:
        return UNTOKENIZED_PREFIX + NONCE_CHANCE
    specials = tokenizer.tokenize("", True)
    lead = tokenizer.tokenize(NONCE_LEAD.strip(), False)
    return len(specials) + len(lead) + NONCE_CHANCE
