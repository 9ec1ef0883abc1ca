"""The xdist schedule of a fleet: every case of one endpoint on one worker, endpoints spread.

pytest-xdist's ``--dist loadgroup`` means to do this with ``xdist_group`` marks (which fleet
items carry), but xdist 3.8 marks a group by rewriting ``item._nodeid``, which pytest 9 no
longer reads: the groups are lost and one endpoint's cases land on several workers that then
wait for each other's GPU lock. So the controller schedules a fleet itself, with xdist's
scope scheduler keyed by the endpoint named first in the test id (``[box2-reasoning-ctx13]``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from xdist.scheduler import LoadScopeScheduling  # type: ignore[import-untyped]


class EndpointScheduling(LoadScopeScheduling):  # type: ignore[misc]
    """xdist's scope scheduling with one scope per fleet endpoint."""

    def __init__(self, config: pytest.Config, log: Any, names: Sequence[str]) -> None:
        super().__init__(config, log)
        self.names = frozenset(names)

    def _split_scope(self, nodeid: str) -> str:
        return scope_of(nodeid, self.names)


def scope_of(nodeid: str, names: frozenset[str]) -> str:
    """The endpoint of a fleet test's node id, else the node id itself (a scope of its own)."""
    base = nodeid.split("@", 1)[0]  # a working loadgroup's "@group" suffix
    if not base.endswith("]") or "[" not in base:
        return nodeid
    name = base[base.index("[") + 1:-1].split("-", 1)[0]
    return f"specperf-endpoint:{name}" if name in names else nodeid
