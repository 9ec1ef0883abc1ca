"""The tier table (docs/testing.md, linked from README) and `.ci/run` agree: every tier it names
is a command CI runs, and the table quotes no measured count or time (the `.ci/run` step
table is where those live). CI builds the docs site strictly, so a broken link fails it."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TIERS = (ROOT / "docs" / "testing.md").read_text()
CI = (ROOT / ".ci" / "run").read_text()


def _tier_rows() -> list[tuple[str, str]]:
    table = TIERS.split("| command | runs | budget on 2 idle cores |", 1)[1].split("\n\n", 1)[0]
    rows = [line for line in table.splitlines() if line.startswith("| `")]
    return [(re.match(r"\| `([^`]+)`", r)[1], r) for r in rows]  # type: ignore[index]


def test_every_tier_in_the_table_is_a_command_ci_runs() -> None:
    commands = [c for c, _ in _tier_rows()]
    assert commands == ["pytest -n 2", "pytest -n 6 --dist worksteal -m slow",
                        "bash ci/real-tier.sh", "bash ci/real-vllm-tier.sh", "bash .ci/run"]
    for command in commands[:-1]:
        assert re.search(rf"^run \w+ (python -m )?{re.escape(command)}( |$)", CI, re.M), command


def test_the_tier_table_quotes_no_measured_count_or_date() -> None:
    for _, row in _tier_rows():
        assert not re.search(r"\d+ tests|20\d\d-\d\d-\d\d", row), row


def test_ci_prints_the_time_of_every_step_even_when_one_fails() -> None:
    assert "trap summary EXIT" in CI and 'echo; echo "== time per step (exit $rc)"' in CI


def test_ci_builds_the_docs_strictly_and_readme_links_the_tier_table() -> None:
    assert re.search(r"^run docs mkdocs build --strict\b", CI, re.M)
    assert "(docs/testing.md)" in (ROOT / "README.md").read_text()
    assert "testing.md" in (ROOT / "mkdocs.yml").read_text()


def test_every_docs_page_readme_links_exists() -> None:
    readme = (ROOT / "README.md").read_text()
    targets = re.findall(r"\]\((docs/[^)#]+)(?:#[^)]*)?\)", readme)
    assert targets  # README links the pages it moved its sections to
    missing = [t for t in targets if not (ROOT / t).is_file()]
    assert not missing, missing
