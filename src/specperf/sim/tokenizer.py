"""The simulator's own deterministic tokenizer.

Rule: a text is split into pieces by the regex ``\\s*(?:\\w+|[^\\w\\s])|\\s+`` -- each
piece is optional leading whitespace plus either one word (``\\w+``) or one punctuation
character; whitespace at the very end of the text is a piece of its own. Concatenating the
pieces reproduces the text exactly, so detokenize(tokenize(t)) == t.

Ids are stable across processes (so two simulators, or a client that caches counts, agree):
ids 0, 1, 2 are reserved for ``<pad>``, ``<bos>``, ``<eos>``; every other piece gets
``1000 + crc32(piece.encode("utf-8")) % 1_000_000``. Collisions are possible in principle and
harmless here: the reverse map keeps the first piece seen for an id.

The reverse map (id -> piece) is filled by every tokenize call and by the generator's
vocabulary, so detokenize works for any id the server has produced or seen; any other id is
unknown (the HTTP layer answers 400).

Special pieces (the Kimi K2 think and tool-call markers, added by ``add_special``) are single
tokens: ``encode`` cuts them out of the text before applying the regex, as a real tokenizer
keeps its special tokens whole. They are not skipped by ``decode``.

Chat messages are rendered with a Kimi-style template (see :func:`render_chat`) and then
tokenized with ``<bos>``, like SGLang's tokenizer manager does for text prompts.
"""

from __future__ import annotations

import json
import re
import zlib
from collections.abc import Iterable, Mapping, Sequence

PAD_ID = 0
BOS_ID = 1
EOS_ID = 2
_SPECIAL = {PAD_ID: "<pad>", BOS_ID: "<bos>", EOS_ID: "<eos>"}
_PIECE_RE = re.compile(r"\s*(?:\w+|[^\w\s])|\s+")
_ID_BASE = 1000
_ID_SPAN = 1_000_000


class UnknownTokenError(ValueError):
    """An id the simulator never produced nor saw."""

    def __init__(self, token_id: int) -> None:
        super().__init__(f"unknown token id {token_id}")
        self.token_id = token_id


def split_pieces(text: str) -> list[str]:
    """Split text into the pieces described in the module docstring."""
    return _PIECE_RE.findall(text)


def piece_id(piece: str) -> int:
    """The stable id of one piece."""
    return _ID_BASE + zlib.crc32(piece.encode("utf-8")) % _ID_SPAN


class Tokenizer:
    """Text <-> ids with a process-wide reverse map (see module docstring)."""

    def __init__(self) -> None:
        self._pieces: dict[int, str] = dict(_SPECIAL)
        # Skipping crc32 for pieces seen before keeps the prompt path cheap.
        self._ids: dict[str, int] = {}
        self._special: re.Pattern[str] | None = None
        self._special_pieces: list[str] = []

    def register(self, piece: str) -> int:
        """Learn one piece and return its id."""
        token_id = self._ids.get(piece)
        if token_id is None:
            token_id = piece_id(piece)
            self._ids[piece] = token_id
            self._pieces.setdefault(token_id, piece)
        return token_id

    def add_special(self, piece: str) -> int:
        """Make ``piece`` a single token wherever it occurs in an encoded text."""
        if piece not in self._special_pieces:
            self._special_pieces.append(piece)
            longest_first = sorted(self._special_pieces, key=len, reverse=True)
            self._special = re.compile("(" + "|".join(map(re.escape, longest_first)) + ")")
        return self.register(piece)

    def adopt(self, token_id: int) -> None:
        """Give a client-supplied id nobody has produced a placeholder piece."""
        self._pieces.setdefault(token_id, f" <{token_id}>")

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        """Tokenize text, prepending ``<bos>`` when add_special_tokens."""
        ids = [BOS_ID] if add_special_tokens else []
        if self._special is None:
            ids.extend(self.register(p) for p in split_pieces(text))
            return ids
        # re.split with a capturing group: odd items are the special pieces themselves.
        for i, part in enumerate(self._special.split(text)):
            if i % 2:
                ids.append(self.register(part))
            elif part:
                ids.extend(self.register(p) for p in split_pieces(part))
        return ids

    def decode(self, ids: Iterable[int], skip_special: bool = True) -> str:
        """Detokenize; raises UnknownTokenError for an id never seen."""
        out: list[str] = []
        for token_id in ids:
            if skip_special and token_id in _SPECIAL:
                continue
            piece = self._pieces.get(token_id)
            if piece is None:
                raise UnknownTokenError(token_id)
            out.append(piece)
        return "".join(out)

    def piece(self, token_id: int) -> str:
        """The text of one known id (special ids render as empty text)."""
        if token_id in _SPECIAL:
            return ""
        return self._pieces[token_id]

    def knows(self, ids: Sequence[int]) -> bool:
        """True when every id has a known piece."""
        return all(i in self._pieces for i in ids)


def render_chat(messages: Sequence[Mapping[str, object]], tools: object = None) -> str:
    """Render chat messages with the Kimi-style template the simulator documents.

    Tools (when the request has them and ``tool_choice`` is not "none") come first, as
    ``<|im_system|>tool_declare<|im_middle|>{tools as JSON}<|im_end|>``.
    Each message becomes ``<|im_user|>{role}<|im_middle|>{content}<|im_end|>`` (the marker
    word follows the role: ``im_user``, ``im_system`` or ``im_assistant``), and the prompt
    ends with ``<|im_assistant|>assistant<|im_middle|>`` so the model answers next.
    """
    parts: list[str] = []
    if tools:
        declared = json.dumps(tools, ensure_ascii=False, separators=(",", ":"))
        parts.append(f"<|im_system|>tool_declare<|im_middle|>{declared}<|im_end|>")
    for message in messages:
        role = str(message.get("role", "user"))
        marker = role if role in ("system", "assistant") else "user"
        parts.append(f"<|im_{marker}|>{role}<|im_middle|>{_content_text(message)}<|im_end|>")
    parts.append("<|im_assistant|>assistant<|im_middle|>")
    return "".join(parts)


def _content_text(message: Mapping[str, object]) -> str:
    # OpenAI allows content as a list of parts; only text parts matter to a text model.
    content = message.get("content", "")
    if isinstance(content, list):
        return "".join(
            str(p.get("text", "")) for p in content if isinstance(p, dict)
        )
    return "" if content is None else str(content)
