"""Per-request physics: repetitiveness, acceptance, text continuation, and step time.

Acceptance. Each verify step a request commits ``1 + accepted drafts`` tokens. The mean
commit rises with how repetitive the recent context is: over the last W tokens (the drafter
window, profile ``window``) we track n, the window fill, and s, the fraction of window tokens
whose 4-gram (three preceding tokens + itself) already occurred earlier in the window. Then::

    s_eff = max(0, (s - rep_floor) / (1 - rep_floor))   # natural prose repeats a little
    mean  = m_free(n) + (m_rep(n) - m_free(n)) * s_eff
    mean  = clamp(mean * acceptance_mult, 1, max_commit)

m_free and m_rep are piecewise-linear in n (profile knots). The statistics are kept
incrementally: O(tokens committed) per step, never O(context).

The draw per step is ``floor(mean + jitter + carry)`` capped at max_commit and the tokens
left, where jitter is differenced Gaussian noise (sd ``commit_sd`` per step) and carry is the
fractional remainder of the previous step. Steps still vary (a realistic histogram), but the
per-request average tracks the mean within a fraction of a token, so a single 600-token
request reproduces the incident's acceptance instead of a Poisson-noisy +-4 %.

Text. If the window is repetitive (s > rep_floor) and the last three tokens occurred earlier,
the next token copies what followed them last time, so repeated padding keeps repeating;
otherwise it is a word from a fixed pseudo-word vocabulary, so varied prose stays varied (a
common trigram at the end of varied prose must not start a verbatim replay of the prompt).

Step time (simulated ms, before the time scale)::

    step = (a + b * slope_mult * sum(context) + c * (running - 1))
           * max(0.05, 1 + noise * z) * step_time_mult
"""

from __future__ import annotations

import math
from collections import deque

import numpy as np

from specperf.sim.profile import Physics
from specperf.sim.tokenizer import Tokenizer

_VOCAB_SEED = 20260415
_VOCAB_SIZE = 4096
_SYLLABLES = [c + v for c in "bdfgklmnprstvz" for v in ("a", "e", "i", "o", "u", "ai", "ou")]
_Gram = tuple[int, int, int, int]


class Draws:
    """Buffered draws from a seeded numpy Generator: scalar calls are slow in the hot loop."""

    def __init__(self, seed: int | list[int], size: int = 512) -> None:
        self._rng = np.random.default_rng(seed)
        self._size = size
        self._normals: list[float] = []
        self._uniforms: list[float] = []

    def normal(self) -> float:
        if not self._normals:
            self._normals = self._rng.standard_normal(self._size).tolist()
        return self._normals.pop()

    def uniform(self) -> float:
        if not self._uniforms:
            self._uniforms = self._rng.random(self._size).tolist()
        return self._uniforms.pop()


class RepetitionWindow:
    """Window fill n and repeated-4-gram fraction s over the last W tokens, kept incrementally."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._entries: deque[tuple[_Gram | None, bool]] = deque()
        self._counts: dict[_Gram, int] = {}
        self._repeated = 0
        self._last: tuple[int, ...] = ()

    @property
    def fill(self) -> int:
        return len(self._entries)

    @property
    def fraction(self) -> float:
        return self._repeated / len(self._entries) if self._entries else 0.0

    def push(self, token: int) -> None:
        last = self._last
        gram: _Gram | None = None
        seen = False
        if len(last) == 3:
            gram = (last[0], last[1], last[2], token)
            count = self._counts.get(gram, 0)
            seen = count > 0
            self._counts[gram] = count + 1
        self._last = (*last[-2:], token)
        self._entries.append((gram, seen))
        self._repeated += seen
        if len(self._entries) > self._size:
            self._evict()

    def _evict(self) -> None:
        # A token's flag is fixed when it enters; later evictions do not revisit it (cheap,
        # and the error is at most the tokens whose first occurrence has just left).
        gram, seen = self._entries.popleft()
        self._repeated -= seen
        if gram is not None:
            left = self._counts[gram] - 1
            if left:
                self._counts[gram] = left
            else:
                del self._counts[gram]


class Continuation:
    """Chooses the next token: copy a seen trigram's follower, else a vocabulary word."""

    def __init__(self, tokenizer: Tokenizer, vocab: list[int], draws: Draws) -> None:
        self._followers: dict[tuple[int, int, int], int] = {}
        self._vocab = vocab
        self._draws = draws
        self._last: tuple[int, ...] = ()
        self._tokenizer = tokenizer

    def observe(self, token: int) -> None:
        last = self._last
        if len(last) == 3:
            self._followers[(last[0], last[1], last[2])] = token
        self._last = (*last[-2:], token)

    def next_token(self, copy: bool) -> int:
        """Copy the seen trigram's follower when ``copy`` (the context is repetitive)."""
        last = self._last
        if copy and len(last) == 3:
            follower = self._followers.get((last[0], last[1], last[2]))
            if follower is not None:
                return follower
        return self._vocab[int(self._draws.uniform() * len(self._vocab))]


class CommitDraw:
    """Tokens committed per step: mean plus differenced jitter with carried remainder."""

    def __init__(self, draws: Draws, sd: float, max_commit: int) -> None:
        self._draws = draws
        self._sd = sd / math.sqrt(2.0)
        self._max = max_commit
        self._z_prev = draws.normal()
        self._carry = 0.0

    def draw(self, mean: float, remaining: int) -> int:
        z = self._draws.normal()
        x = mean + self._sd * (z - self._z_prev) + self._carry
        self._z_prev = z
        commit = min(max(int(x), 1), self._max, remaining)
        self._carry = min(max(x - commit, -1.0), 1.0)
        return commit


def is_repetitive(physics: Physics, window: RepetitionWindow) -> bool:
    """Whether the text generation continues repetitions (see module docstring)."""
    return window.fraction > physics.rep_floor


def mean_commit(physics: Physics, window: RepetitionWindow, acceptance_mult: float) -> float:
    """The expected tokens committed by the next verify step (module docstring formula)."""
    n = window.fill
    free = physics.m_free(n)
    floor = physics.rep_floor
    s_eff = max(0.0, (window.fraction - floor) / (1.0 - floor)) if floor < 1.0 else 0.0
    mean = (free + (physics.m_rep(n) - free) * s_eff) * acceptance_mult
    return min(max(mean, 1.0), float(physics.max_commit))


def step_ms(
    physics: Physics,
    context_sum: int,
    running: int,
    z: float,
    noise: float,
    step_mult: float = 1.0,
    slope_mult: float = 1.0,
) -> float:
    """Simulated duration of one verify step of the whole batch (module docstring formula)."""
    base = physics.a_ms + physics.b_ms_per_token * slope_mult * context_sum
    base += physics.c_ms * max(running - 1, 0)
    return base * max(0.05, 1.0 + noise * z) * step_mult


def prefill_ms(physics: Physics, uncached_tokens: int) -> float:
    """Simulated prefill duration of one request (first token included)."""
    return physics.prefill_ms + physics.prefill_ms_per_token * uncached_tokens


def build_vocabulary(tokenizer: Tokenizer) -> list[int]:
    """The fixed pseudo-word vocabulary (same in every process), registered for detokenize."""
    rng = np.random.default_rng(_VOCAB_SEED)
    words: list[str] = []
    seen: set[str] = set()
    while len(words) < _VOCAB_SIZE:
        count = int(rng.integers(1, 4))
        word = "".join(_SYLLABLES[int(i)] for i in rng.integers(0, len(_SYLLABLES), count))
        if word not in seen:
            seen.add(word)
            words.append(" " + word)
    # Some punctuation keeps the text prose-like; it never repeats a 4-gram by itself.
    words.extend([",", ".", ";"] * 64)
    return [tokenizer.register(w) for w in words]
