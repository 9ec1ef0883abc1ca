"""One idea a sentence: none over 40 words in the pages a newcomer reads first, none over 60
in any prose a user reads (README.md, docs/*.md, CHANGELOG.md).

``python tests/test_prose.py`` prints every prose file's longest sentence (words and its first
words), longest first; ``python tests/test_prose.py FILE…`` prints each file's longest sentence
and how many run over 40 words. Prose only: code blocks, indented blocks, tables, headings and
link definitions are not sentences; an inline code span counts as one word; each list item is
its own paragraph.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LIMIT = 40
PAGES = ("README.md", "docs/gate.md", "docs/explain.md")
# Every other page of prose a user reads holds no sentence over this.
MAX_WORDS = 60
_ITEM = re.compile(r"^\s*(?:[-*]|\d+\.)\s+")
_LINK_DEFINITION = re.compile(r"^\s*\[[^\]]+\]:\s")
# A sentence ends at . ! or ?, maybe closed by a bracket, quote or emphasis, before a space and
# a letter (Greek too), a digit, an opening bracket, a quote or emphasis.
_END = re.compile(r"(?:(?<=[.!?])|(?<=[.!?][)\"'*\]]))\s+(?=[A-Za-z0-9α-ωΑ-Ω(*\"'])")


def _paragraphs(text: str) -> Iterator[str]:
    block: list[str] = []
    fence = False
    for line in text.splitlines():
        if line.strip().startswith("```"):
            fence = not fence
            line = ""
        skip = fence or line.startswith("    ") and not block or line.lstrip().startswith("|")
        skip = skip or bool(_LINK_DEFINITION.match(line))
        if skip or not line.strip() or _ITEM.match(line) or line.startswith("#"):
            if block:
                yield " ".join(block)
            ends = skip or not line.strip() or line.startswith("#")
            block = [] if ends else [_ITEM.sub("", line)]
            continue
        block.append(line.strip())
    if block:
        yield " ".join(block)


def sentences(text: str) -> Iterator[str]:
    """The prose sentences of a Markdown page."""
    for paragraph in _paragraphs(text):
        flat = re.sub(r"`[^`]*`", "CODE", " ".join(paragraph.split()))
        flat = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", flat)  # a link reads as its text
        for abbreviation in ("e.g.", "i.e.", "etc.", "vs.", "cf."):
            flat = flat.replace(abbreviation, abbreviation.replace(".", ""))
        yield from (s for s in _END.split(flat) if s.strip())


def longest(path: Path) -> tuple[int, str]:
    return max(((len(s.split()), s) for s in sentences(path.read_text(encoding="utf-8"))),
               default=(0, ""))


def prose_files() -> list[Path]:
    """README.md, every page of docs/ and CHANGELOG.md."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "CHANGELOG.md"]


def offenders(limit: int) -> list[tuple[int, str, str]]:
    """Every sentence over ``limit`` words in the prose files: (words, file, sentence)."""
    found = [(len(s.split()), str(path.relative_to(ROOT)), s) for path in prose_files()
             for s in sentences(path.read_text(encoding="utf-8")) if len(s.split()) > limit]
    return sorted(found, key=lambda row: -row[0])


def test_sentences_skip_what_is_not_prose() -> None:
    text = ("# A heading of several words\n\nOne two `a b c` three. Four [five six](x.md).\n\n"
            "```\nnot prose. Nor this.\n```\n\n    indented code. Too.\n\n"
            "| a | table row. |\n\n[ref]: https://example.com/page\n\n- An item.\n- Next one.\n")
    assert list(sentences(text)) == ["One two CODE three.", "Four five six.", "An item.",
                                     "Next one."]


def test_a_sentence_may_end_inside_a_bracket_or_quote() -> None:
    assert list(sentences('One (two.) Three "four." Five σ. σ six, e.g. seven.')) == [
        "One (two.)", 'Three "four."', "Five σ.", "σ six, eg seven."]


def test_no_sentence_over_60_words_anywhere() -> None:
    found = offenders(MAX_WORDS)
    assert not found, f"{len(found)} sentences over {MAX_WORDS} words:\n" + "\n".join(
        f"{name}: {words} words: {sentence}" for words, name, sentence in found)


@pytest.mark.parametrize("page", PAGES)
def test_no_sentence_runs_over_the_limit(page: str) -> None:
    words, sentence = longest(ROOT / page)
    assert words <= LIMIT, f"{page}: {words} words: {sentence}"


def print_table() -> None:
    """Each prose file's longest sentence, longest first."""
    rows = sorted(((*longest(path), str(path.relative_to(ROOT))) for path in prose_files()),
                  reverse=True)
    over = [name for _, name, _ in offenders(LIMIT)]
    width = max(len(name) for _, _, name in rows)
    print(f"{'file':<{width}}  words  >{LIMIT}  first words")
    for words, sentence, name in rows:
        print(f"{name:<{width}}  {words:>5}  {over.count(name):>3}  "
              f"{' '.join(sentence.split()[:8])} …")
    for limit in (LIMIT, MAX_WORDS):
        print(f"sentences over {limit} words: {len(offenders(limit))}")


if __name__ == "__main__" and len(sys.argv) == 1:
    print_table()
elif __name__ == "__main__":
    for name in sys.argv[1:]:
        found = list(sentences(Path(name).read_text(encoding="utf-8")))
        top = max((len(s.split()) for s in found), default=0)
        over = sum(1 for s in found if len(s.split()) > LIMIT)
        print(f"{name}: longest sentence {top} words, {over} over {LIMIT}")
