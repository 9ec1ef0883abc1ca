"""The pages a newcomer reads first keep one idea a sentence: none over 40 words.

``python tests/test_prose.py FILE…`` prints each file's longest sentence (words) and how many
run over the limit. Prose only: code blocks, indented blocks and tables are not sentences;
an inline code span counts as one word; each list item is its own paragraph.
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
_ITEM = re.compile(r"^\s*(?:[-*]|\d+\.)\s+")


def _paragraphs(text: str) -> Iterator[str]:
    block: list[str] = []
    fence = False
    for line in text.splitlines():
        if line.strip().startswith("```"):
            fence = not fence
            line = ""
        skip = fence or line.startswith("    ") and not block or line.lstrip().startswith("|")
        if skip or not line.strip() or _ITEM.match(line) or line.startswith("#"):
            if block:
                yield " ".join(block)
            block = [] if skip or not line.strip() or line.startswith("#") else [line]
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
        yield from (s for s in re.split(r"(?<=[.!?])\s+(?=[A-Za-z(*])", flat) if s.strip())


def longest(path: Path) -> tuple[int, str]:
    return max(((len(s.split()), s) for s in sentences(path.read_text(encoding="utf-8"))),
               default=(0, ""))


@pytest.mark.parametrize("page", PAGES)
def test_no_sentence_runs_over_the_limit(page: str) -> None:
    words, sentence = longest(ROOT / page)
    assert words <= LIMIT, f"{page}: {words} words: {sentence}"


if __name__ == "__main__":
    for name in sys.argv[1:] or PAGES:
        found = list(sentences(Path(name).read_text(encoding="utf-8")))
        top = max((len(s.split()) for s in found), default=0)
        over = sum(1 for s in found if len(s.split()) > LIMIT)
        print(f"{name}: longest sentence {top} words, {over} over {LIMIT}")
