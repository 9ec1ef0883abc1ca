"""A pytest plugin (``-p figtrace``, tests/figures_check.py): every value a function of
the judged modules returns, in call order, one JSON line each to ``$FIGTRACE_OUT``. The same
tests run over two trees of the package then show whether any judge's figure moved."""

from __future__ import annotations

import dataclasses
import enum
import json
import math
import os
import sys
import threading
from types import FrameType
from typing import IO, Any

import numpy as np
import pytest

# The modules whose standard errors issue 48 routed through core/interval.py.
FILES = ("judge/positions.py", "judge/fit.py", "judge/verdict.py", "judge/explain/prediction.py",
         "judge/reconcile.py", "bisect/classify.py", "core/limits.py", "judge/concurrency.py",
         "judge/pathverdict.py", "judge/sweep/estimate.py", "core/interval.py")
_state: dict[str, Any] = {"out": None, "test": ""}


def norm(x: Any, depth: int = 0) -> Any:
    """``x`` as JSON: dataclasses by field, enums by value, numpy as Python numbers."""
    if depth > 6:
        return "…"
    if isinstance(x, enum.Enum):
        return str(x.value)
    if x is None or isinstance(x, bool | int | str):
        return x
    if isinstance(x, float):
        return x if math.isfinite(x) else repr(x)
    if isinstance(x, np.generic):
        return norm(x.item(), depth)
    if isinstance(x, np.ndarray):
        return [norm(v, depth + 1) for v in x.tolist()]
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return {"__": type(x).__name__, **{f.name: norm(getattr(x, f.name), depth + 1)
                                          for f in dataclasses.fields(x)}}
    if isinstance(x, dict):
        return {str(k): norm(v, depth + 1) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [norm(v, depth + 1) for v in x]
    return f"<{type(x).__name__}>"


def _profile(frame: FrameType, event: str, arg: Any) -> None:
    if event != "return":
        return
    path = frame.f_code.co_filename.replace("\\", "/")
    rel = path.rsplit("/specperf/", 1)[-1]
    if "/specperf/" not in path or rel not in FILES or frame.f_code.co_name.startswith("<"):
        return
    out: IO[str] = _state["out"]
    out.write(json.dumps([_state["test"], rel, frame.f_code.co_name, norm(arg)],
                         sort_keys=True) + "\n")


def pytest_configure(config: pytest.Config) -> None:
    _state["out"] = open(os.environ["FIGTRACE_OUT"], "w", encoding="utf-8")  # noqa: SIM115
    sys.setprofile(_profile)
    threading.setprofile(_profile)


def pytest_runtest_setup(item: pytest.Item) -> None:
    _state["test"] = item.nodeid


def pytest_unconfigure(config: pytest.Config) -> None:
    sys.setprofile(None)
    threading.setprofile(None)  # type: ignore[arg-type]
    _state["out"].close()
