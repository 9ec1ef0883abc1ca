"""What is measured: text classes, cases, and prompts of exact token length."""

from __future__ import annotations

import random
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Protocol

from ..core.errors import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


@dataclass(frozen=True)
class Case:
    """One cell of the matrix: a text class at a context length, fixed output length."""

    text_class: str
    context: int
    output_tokens: int

    @property
    def id(self) -> str:
        return f"{self.text_class}-ctx{self.context}"

    def to_dict(self) -> dict[str, Any]:
        return {"text_class": self.text_class, "context": self.context,
                "output_tokens": self.output_tokens, "id": self.id}


@dataclass(frozen=True)
class TextClass:
    """A kind of prompt text. ``kind`` is repeat (``text`` repeated), prose or code (generated)."""

    name: str
    kind: str
    description: str = ""
    text: str = ""
    seed: int = 0
    suffix: str = ""

    def body(self, min_chars: int) -> str:
        """At least ``min_chars`` characters of this class's text (without the suffix)."""
        if self.kind == "repeat":
            return self.text * (min_chars // max(len(self.text), 1) + 1)
        return generate(self.kind, self.seed, min_chars)


KINDS = ("repeat", "prose", "code")


def load_text_class(path: Path) -> TextClass:
    """Read one text class TOML file; ConfigError naming the file if it is wrong."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"text class file {path} cannot be read: {exc}") from exc
    kind = data.get("kind", "repeat")
    if kind not in KINDS or (kind == "repeat" and not data.get("text")):
        raise ConfigError(
            f"text class file {path}: kind must be one of {', '.join(KINDS)} and a repeat "
            "class needs a non-empty text = \"...\".")
    return TextClass(name=str(data.get("name", path.stem)), kind=kind,
                     description=str(data.get("description", "")), text=str(data.get("text", "")),
                     seed=int(data.get("seed", 0)), suffix=str(data.get("suffix", "")))


def load_text_classes(extra_dir: Path | None = None) -> dict[str, TextClass]:
    """The built-in classes plus every ``*.toml`` in ``extra_dir`` (which may override)."""
    builtin = resources.files("specperf.plan") / "textclasses"
    paths = [Path(str(p)) for p in builtin.iterdir() if p.name.endswith(".toml")]
    if extra_dir is not None:
        if not extra_dir.is_dir():
            raise ConfigError(f"--specperf-text-class-dir {extra_dir} is not a directory.")
        paths += sorted(extra_dir.glob("*.toml"))
    classes = [load_text_class(p) for p in paths]
    return {c.name: c for c in classes}


def select_classes(names: tuple[str, ...], available: dict[str, TextClass]) -> list[TextClass]:
    unknown = [n for n in names if n not in available]
    if unknown:
        raise ConfigError(
            f"unknown text class {', '.join(unknown)}: available are "
            f"{', '.join(sorted(available))}; add one as a TOML file in --specperf-text-class-dir.")
    return [available[n] for n in names]


def plan(classes: list[TextClass], contexts: tuple[int, ...], output_tokens: int,
         lengths: Mapping[str, int] | None = None) -> list[Case]:
    """The case matrix: text classes × contexts at one output length, or the length
    ``lengths`` names for a case (``--specperf-case-output-tokens``)."""
    return [case_at(c.name, ctx, output_tokens, lengths) for c in classes for ctx in contexts]


def case_at(text_class: str, context: int, output_tokens: int,
            lengths: Mapping[str, int] | None = None) -> Case:
    """The case of ``text_class`` at ``context``, at its own length when ``lengths`` names it."""
    case = Case(text_class, context, output_tokens)
    return Case(text_class, context, (lengths or {}).get(case.id, output_tokens))


# -- generated text -------------------------------------------------------------------------
# Word lists large enough that no 4-word run recurs by chance over a few thousand tokens:
# varied text must not look repetitive to a drafter.
_NOUNS = ("archive river lantern engine harbour ledger orchard signal quarry compass "
          "theorem garden circuit glacier market bridge furnace meadow protocol cathedral "
          "cipher canyon ferry hospital journal kernel library monsoon notebook observatory "
          "pendulum quartz reservoir satellite tapestry tunnel vineyard workshop volcano "
          "scaffold telescope manuscript factory lighthouse spreadsheet carnival pipeline "
          "estuary orchestra dialect parliament pharmacy railway sanctuary theatre valley "
          "warehouse algorithm bakery courtyard dynasty embassy fortress gallery horizon "
          "inventory junction labyrinth migration nursery outpost plateau").split()
_ADJS = ("quiet brittle ancient rapid crimson hollow patient sudden distant fragile "
         "luminous narrow generous stubborn silent copper restless humble tangled vivid "
         "frozen gentle hidden jagged mellow obscure polished rusty sombre tidal vacant "
         "wary amber bold coastal dusty elegant feral gilded hazy").split()
_VERBS = ("measures absorbs borrows conceals deflects echoes follows gathers hesitates "
          "illuminates juggles kindles loosens mirrors neglects outlines persuades questions "
          "rebuilds scatters tolerates unravels validates weaves anchors balances catalogues "
          "dissolves elevates forecasts").split()
_ADVS = ("slowly briefly rarely openly gladly barely loudly calmly boldly nearly "
         "eagerly firmly partly wisely").split()
_PREPS = "beneath beside across toward within around against beyond without after".split()
_NAMES = ("Mara Tobias Ilse Kenji Amara Farid Leona Pavel Sunita Oskar Greta Idris").split()


def _sentence(rng: random.Random) -> str:
    c = rng.choice
    forms = (
        lambda: f"The {c(_ADJS)} {c(_NOUNS)} {c(_VERBS)} a {c(_ADJS)} {c(_NOUNS)} "
                f"{c(_PREPS)} the {c(_NOUNS)}.",
        lambda: f"{c(_NAMES)} {c(_ADVS)} {c(_VERBS)} the {c(_NOUNS)}, and the "
                f"{c(_NOUNS)} {c(_VERBS)} {c(_ADVS)}.",
        lambda: f"{c(_PREPS).capitalize()} every {c(_ADJS)} {c(_NOUNS)}, {c(_NAMES)} "
                f"{c(_VERBS)} {rng.randint(2, 9876)} {c(_NOUNS)}s.",
        lambda: f"Why does the {c(_NOUNS)} {c(_VERBS)[:-1]} when the {c(_ADJS)} "
                f"{c(_NOUNS)} {c(_VERBS)} {c(_PREPS)} {c(_NAMES)}?",
    )
    return c(forms)()


def _function(rng: random.Random) -> str:
    c = rng.choice
    name = f"{c(_VERBS)[:-1]}_{c(_NOUNS)}"
    a, b = c(_NOUNS), c(_ADJS)
    return (f"def {name}({a}, {b}_{c(_NOUNS)}={rng.randint(0, 999)}):\n"
            f"    {c(_NOUNS)} = [{a} * {rng.randint(2, 97)} for {a} in range({b}_{c(_NOUNS)})]\n"
            f"    if {a} > {rng.randint(1, 500)}:\n"
            f"        return {c(_NOUNS)}[{rng.randint(0, 9)}] - {rng.random():.3f}\n"
            f"    return sum({c(_NOUNS)}) // {rng.randint(2, 64)}\n\n")


def generate(kind: str, seed: int, min_chars: int) -> str:
    """Deterministic varied text of a generated kind (prose or code)."""
    rng = random.Random(seed)
    make = _sentence if kind == "prose" else _function
    parts: list[str] = []
    size = 0
    while size < min_chars:
        piece = make(rng) + ("" if kind == "code" else " ")
        parts.append(piece)
        size += len(piece)
    return "".join(parts)


# -- prompts of exact token length --------------------------------------------------------------
@dataclass(frozen=True)
class Prompt:
    """A prompt built to a target token count: ids for the native route, text for the rest."""

    text: str
    input_ids: tuple[int, ...] | None
    tokens: int


class Tokenizer(Protocol):
    """The server's own tokenizer, reached over HTTP (see probe.ServerTokenizer)."""

    def tokenize(self, text: str, add_special_tokens: bool) -> list[int]: ...

    def detokenize(self, ids: list[int]) -> str: ...


class Prompts(Protocol):
    """What the measuring loop needs of a prompt builder (exact or calibrated)."""

    classes: dict[str, TextClass]

    @property
    def tokenizer(self) -> Tokenizer | None: ...

    def build(self, case: Case, nonce: str, *, want_ids: bool) -> Prompt: ...


class PromptBuilder:
    """Builds prompts of exactly ``case.context`` tokens with the server's tokenizer.

    Layout: [special tokens] nonce body… suffix. The nonce is unique per request so no
    prefix cache can hide prefill; the body is cut to make the count exact. Tokenized
    bodies are cached per (class, context); a request then costs one small /tokenize
    (the nonce) on the native route, plus one to verify the text on text routes.
    """

    _VERIFY_ROUNDS = 4

    def __init__(self, tokenizer: Tokenizer, classes: dict[str, TextClass]) -> None:
        self.tokenizer = tokenizer
        self.classes = classes
        self._specials = tuple(tokenizer.tokenize("", True))
        self._bodies: dict[tuple[str, int], tuple[list[int], list[int]]] = {}

    def build(self, case: Case, nonce: str, *, want_ids: bool) -> Prompt:
        body, suffix = self._parts(case)
        nonce_ids = self.tokenizer.tokenize(nonce, False)
        room = case.context - len(self._specials) - len(nonce_ids)
        if room < len(suffix):
            suffix = []  # tiny contexts: the instruction does not fit, the text must
        keep = room - len(suffix)
        if keep < 0:
            raise ConfigError(
                f"context {case.context} is too small: the special tokens and the "
                f"{len(nonce_ids)}-token nonce alone take {case.context - room} tokens.")
        ids = [*self._specials, *nonce_ids, *body[:keep], *suffix]
        if want_ids:
            return Prompt(text="", input_ids=tuple(ids), tokens=len(ids))
        return self._as_text(case, nonce, body, suffix, keep)

    def _parts(self, case: Case) -> tuple[list[int], list[int]]:
        key = (case.text_class, case.context)
        if key not in self._bodies:
            tc = self.classes[case.text_class]
            chars = 8 * case.context + 64
            body = self.tokenizer.tokenize(tc.body(chars), False)
            while len(body) < case.context:
                chars *= 2
                body = self.tokenizer.tokenize(tc.body(chars), False)
            suffix = self.tokenizer.tokenize(tc.suffix, False) if tc.suffix else []
            self._bodies[key] = (body, suffix)
        return self._bodies[key]

    def _as_text(self, case: Case, nonce: str, body: list[int], suffix: list[int],
                 keep: int) -> Prompt:
        """Text whose server token count is exact: retokenizing may merge at the seams."""
        suffix_text = self.tokenizer.detokenize(suffix) if suffix else ""
        count = 0
        text = ""
        for _ in range(self._VERIFY_ROUNDS):
            text = nonce + self.tokenizer.detokenize(body[:keep]) + suffix_text
            count = len(self.tokenizer.tokenize(text, True))
            if count == case.context:
                break
            keep += case.context - count
        return Prompt(text=text, input_ids=None, tokens=count)


class CalibratedPromptBuilder:
    """Prompts of a target length on a server with no tokenizer route.

    ``count(text)`` asks the server itself (a one-token generation's ``prompt_tokens``).
    Per (class, context) the number of body words is calibrated once — a secant search on
    the word count, then single words — with a representative nonce; later prompts reuse
    it with their own nonce, which has a fixed shape (digits only) so its token count does
    not vary. When no word count hits the target exactly (a word may be several tokens),
    the nearest count below is used and the prompt is marked inexact: the measurement
    then records the length the server reports.
    """

    _ROUNDS = 12

    @property
    def tokenizer(self) -> Tokenizer | None:
        return None  # no server tokenizer: the prefix-cache guard uses its fallback

    def __init__(self, count: Callable[[str], int], classes: dict[str, TextClass]) -> None:
        self.count = count
        self.classes = classes
        self._plans: dict[tuple[str, int], tuple[list[str], int, str, bool]] = {}

    def build(self, case: Case, nonce: str, *, want_ids: bool) -> Prompt:
        words, keep, suffix, exact = self._calibrated(case, nonce)
        text = nonce + "".join(words[:keep]) + suffix
        return Prompt(text=text, input_ids=None, tokens=case.context if exact else -1)

    def _calibrated(self, case: Case, nonce: str) -> tuple[list[str], int, str, bool]:
        key = (case.text_class, case.context)
        if key not in self._plans:
            tc = self.classes[case.text_class]
            words = re.findall(r"\S+\s*", tc.body(8 * case.context + 64))
            # Tiny contexts: the instruction does not fit, the text must (as PromptBuilder).
            suffix = tc.suffix if tc.suffix and self.count(nonce + tc.suffix) < case.context \
                else ""
            keep, exact = self._search(words, nonce, suffix, case.context)
            self._plans[key] = (words, keep, suffix, exact)
        return self._plans[key]

    def _search(self, words: list[str], nonce: str, suffix: str,
                target: int) -> tuple[int, bool]:
        def tokens(k: int) -> int:
            return self.count(nonce + "".join(words[:k]) + suffix)

        base = tokens(0)
        k = max(1, min(len(words), round((target - base) * 0.75)))
        seen: dict[int, int] = {}
        for _ in range(self._ROUNDS):
            seen[k] = got = tokens(k)
            if got == target:
                return k, True
            per_word = max((got - base) / k, 0.2)
            step = round((target - got) / per_word) or (1 if got < target else -1)
            k = max(1, min(len(words), k + step))
            if k in seen:
                break
        below = [n for n, got in seen.items() if got <= target]
        return (max(below, key=lambda n: seen[n]) if below else 1), False
