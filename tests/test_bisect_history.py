"""specperf bisect --from-history: the last passing and the first failing run of the endpoint
in the history, each mapped to the one version of the deploy log whose declared fingerprint
it reported; anything else is a usage error before any deploy (docs/bisect.md)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from specperf.bisect.deploylog import parse_versions
from specperf.bisect.history import ends_from_history, nights
from specperf.cli import main
from specperf.core.errors import ConfigError
from specperf.store.history import read_history

URL = "http://10.0.0.1:30000"
LINES = [json.dumps({"name": f"v{i}", "image": f"img{i}",
                    "fingerprint": {"draft_model": f"d{i}", "version": "0.5"}})
         for i in range(5)]
VERSIONS = parse_versions("\n".join(LINES), "versions")


def _run(run_id: str, draft: str, failed: list[str] | None = None, label: str = URL,
         **extra: Any) -> dict[str, Any]:
    return {"run_id": run_id, "created": f"2026-12-0{run_id[-1]}T02:00:00+00:00",
            "label": label, "kind": "full", "interrupted": False, "cells": {},
            "fingerprint": {"draft_model": draft, "version": "0.5", "tp_size": 1},
            "failed": failed or [], **extra}


def _write(tmp_path: Path, runs: list[dict[str, Any]]) -> Path:
    (tmp_path / "history.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in runs), encoding="utf-8")
    return tmp_path


def test_the_last_pass_and_the_first_failure_after_it_name_the_ends(tmp_path: Path) -> None:
    runs = [_run("r1", "d0"), _run("r2", "d0", ["padding-ctx1663"]),  # an older incident
            _run("r3", "d1"), _run("r4", "d1", label="http://other:1"),
            _run("r5", "d2", kind="gate"),  # not a full run: not a passing night
            _run("r6", "d2", interrupted=True),
            _run("r7", "d3", ["sweep", "reasoning-ctx3333"]),
            _run("r8", "d4", ["sweep"])]
    entries = read_history(_write(tmp_path, runs))  # what the command reads
    ends = ends_from_history(entries, URL + "/", VERSIONS, "reports")
    assert (ends.good.name, ends.bad.name) == ("v1", "v3")
    assert (ends.passing.run_id, ends.failing.run_id) == ("r3", "r7")
    doc = ends.to_dict()
    assert doc["good"]["created"] == "2026-12-03T02:00:00+00:00"
    assert doc["bad"] == {"version": "v3", "run_id": "r7", "created": "2026-12-07T02:00:00+00:00",
                          "fingerprint": runs[6]["fingerprint"],
                          "failed": ["sweep", "reasoning-ctx3333"]}


def test_a_simulators_runs_are_its_own_by_its_simulated_label() -> None:
    sim = f"SIMULATED ({URL})"
    runs = [_run("r1", "d0", label=sim), _run("r2", "d2", ["sweep"], label=sim)]
    good, bad = nights(runs, URL, "h")
    assert (good.run_id, bad.run_id) == ("r1", "r2")


@pytest.mark.parametrize(("runs", "message"), [
    ([_run("r1", "d0", label="http://other:1")],
     f"--from-history h holds 1 runs but none of {URL} (it holds runs of http://other:1): "
     "pass --good V --bad V instead."),
    ([_run("r1", "d0", ["sweep"]), _run("r2", "d1")],
     f"--from-history h: the 2 runs of {URL} (1 passing, 1 failing) hold no passing full run "
     "followed by a failing one: pass --good V --bad V instead."),
    ([_run("r1", "d9"), _run("r2", "d1", ["sweep"])],
     "--from-history h: the last passing run r1 (2026-12-01T02:00:00+00:00) reported "
     "draft_model='d9', version='0.5' and matches no version of the versions file: "
     "pass --good V --bad V instead."),
    ([_run("r1", "d3"), _run("r2", "d0", ["sweep"])],
     "the last passing run r1 ran v3 and the first failing run r2 ran v0, which is not a later "
     "version of the versions file: pass --good V --bad V instead."),
])
def test_a_history_that_names_no_pair_of_versions_says_what_it_found(
        runs: list[dict[str, Any]], message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        ends_from_history(runs, URL, VERSIONS, "h")


def test_a_version_that_declares_nothing_the_fingerprint_has_is_a_candidate_too() -> None:
    # v5's line declares no fingerprint: it matches any night, so d1's night is ambiguous.
    versions = parse_versions("\n".join([*LINES, '{"name": "v5", "image": "img5"}']), "f")
    runs = [_run("r1", "d1"), _run("r2", "d4", ["sweep"])]
    with pytest.raises(ConfigError, match=re.escape(
            "the last passing run r1 (2026-12-01T02:00:00+00:00) reported draft_model='d1', "
            "version='0.5' and matches 2 versions (v1, v5) of the versions file")):
        ends_from_history(runs, URL, versions, "h")


def test_fields_the_fingerprint_lacks_are_not_compared() -> None:
    old = _run("r1", "d1")
    del old["fingerprint"]["version"]  # an older record without the server version
    ends = ends_from_history([old, _run("r2", "d2", ["sweep"])], URL, VERSIONS, "h")
    assert (ends.good.name, ends.bad.name) == ("v1", "v2")


def test_from_history_usage_errors_exit_2_before_any_deploy(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    versions = tmp_path / "versions.jsonl"
    versions.write_text("".join(json.dumps({"name": v.name, **v.fields}) + "\n"
                                for v in VERSIONS), encoding="utf-8")
    marker = tmp_path / "deployed"
    base = ["bisect", "--endpoint", URL, "--versions", str(versions),
            "--deploy", f"touch {marker}-{{version}}"]
    (tmp_path / "reports").mkdir()
    reports = _write(tmp_path / "reports", [])
    assert main([*base, "--from-history", str(reports), "--good", "v0"]) == 2
    assert "--from-history takes the ends from the history: leave out --good and --bad" \
        in capsys.readouterr().err
    assert main([*base, "--from-history", str(tmp_path / "nowhere")]) == 2
    assert "nowhere does not exist" in capsys.readouterr().err
    assert main([*base, "--from-history", str(reports / "history.jsonl")]) == 2
    assert "holds 0 runs but none of http://10.0.0.1:30000: pass --good V --bad V instead." \
        in capsys.readouterr().err
    _write(reports, [_run("r1", "d4"), _run("r2", "d1", ["sweep"])])
    assert main([*base, "--from-history", str(reports)]) == 2
    assert "the last passing run r1 ran v4 and the first failing run r2 ran v1, which is not " \
        "a later version" in capsys.readouterr().err
    assert main([*base, "--from-history", str(reports), "--results-db", "ftp://x"]) == 2
    assert "--results-db 'ftp://x' is not a store URL" in capsys.readouterr().err
    assert not list(tmp_path.glob("deployed*"))
