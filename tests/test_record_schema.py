"""The results schema is enforced by a maintained validator (jsonschema, record/schema.py):
every keyword it uses holds — a negative median or a run id of the wrong shape is refused
with a ConfigError that names the file — and its status words are the contract's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specperf.core.contract import REASONS, STATUSES
from specperf.core.errors import ConfigError
from specperf.record import schema
from test_report import make_doc


def _written(tmp_path: Path, doc: dict) -> Path:
    path = tmp_path / "results.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def test_a_valid_document_loads(tmp_path: Path) -> None:
    doc = json.loads(json.dumps(make_doc()))
    assert schema.load(_written(tmp_path, doc)) == doc


def test_a_negative_median_and_a_bad_run_id_are_refused_naming_the_file(tmp_path: Path) -> None:
    doc = json.loads(json.dumps(make_doc()))
    doc["run_id"] = "yesterday"
    case = next(iter(doc["measurements"]))
    doc["measurements"][case]["summaries"]["tok_s"]["median"] = -3.0
    path = _written(tmp_path, doc)
    with pytest.raises(ConfigError) as info:
        schema.load(path)
    assert str(info.value) == (
        f"{path} is not a specperf results file (schema v1): "
        f"$.measurements.{case}.summaries.tok_s.median: -3.0 is less than the minimum of 0; "
        "$.run_id: 'yesterday' does not match "
        "'^[0-9]{8}-[0-9]{6}-[0-9a-f]{4}([.][^/\\\\\\\\]+)?$'.")


def test_a_fleet_part_run_id_names_its_endpoint() -> None:
    doc = json.loads(json.dumps(make_doc()))
    doc["run_id"] = "20250101-000000-aaaa.gpu-a"
    assert schema.validate(doc) == []
    doc["run_id"] = "20250101-000000-aaaa.../x"  # never a path out of the report directory
    assert schema.validate(doc) != []


def test_the_schema_states_the_contracts_words_and_reasons() -> None:
    defs = schema.schema()["$defs"]
    assert tuple(defs["status"]["enum"]) == STATUSES
    assert set(defs["reason"]["enum"]) == {"", *REASONS}
    # Verdicts and reconcile rows: the contract's words first, older records' words after.
    for name in ("verdict", "reconcile_row"):
        words = defs[name]["properties"]["status"]["enum"]
        assert tuple(words[:len(STATUSES)]) == STATUSES, name


def test_an_unreadable_file_is_a_config_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    path.write_text("{not json", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        schema.load(path)
    assert str(info.value).startswith(f"cannot read results file {path}: Expecting ")
    assert str(info.value).endswith(": point it at the results.json a perf run wrote.")
