"""Prefix cache: the longest cached token prefix of a prompt (page_size 1, like DDTree needs)."""

from __future__ import annotations

from collections.abc import Sequence

_Node = dict[int, "_Node"]


class PrefixCache:
    """A token trie. Cleared wholesale when it grows past ``max_nodes`` (a crude eviction)."""

    def __init__(self, max_nodes: int = 2_000_000) -> None:
        self._root: _Node = {}
        self._nodes = 0
        self._max_nodes = max_nodes

    def match(self, ids: Sequence[int]) -> int:
        """Length of the longest cached prefix of ids."""
        node = self._root
        length = 0
        for token in ids:
            child = node.get(token)
            if child is None:
                break
            node = child
            length += 1
        return length

    def insert(self, ids: Sequence[int]) -> None:
        """Remember every prefix of ids."""
        if self._nodes + len(ids) > self._max_nodes:
            self.clear()
        node = self._root
        for token in ids:
            child = node.get(token)
            if child is None:
                child = {}
                node[token] = child
                self._nodes += 1
            node = child

    def clear(self) -> None:
        """Forget everything (/flush_cache)."""
        self._root = {}
        self._nodes = 0
