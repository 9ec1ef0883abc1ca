"""Baseline files and the store: round trip, clear errors, never overwritten (no plugin)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

import specperf
from specperf.baselines.diff import describe_changes
from specperf.baselines.store import SCHEMA_VERSION, Baseline, BaselineStore, CaseBaseline
from specperf.core.errors import BaselineError, ConfigError
from specperf.core.fingerprint import deployment_slug, fingerprint_differences
from specperf.core.model import ContextFit
from specperf.core.stats import Summary
from specperf.measure.sample import Measurement, Sample
from specperf.plan.workload import Case

FINGERPRINT: dict[str, Any] = {
    "model": "moonshotai/Kimi-K2.6", "speculative_algorithm": "DDTREE",
    "draft_model": "/models/Kimi-K2.6-Drafter/", "ddtree_budget": 64,
    "attention_backend": "triton", "page_size": 1, "tp_size": 8, "version": "0.5.3",
    "simulated": False,
}


def case(context: int, tok_s: float, commit: float, step: float) -> CaseBaseline:
    # floats, as summaries of real samples are: the file then round-trips byte for byte
    metrics = {"tok_s": Summary(float(tok_s), 0.4, 5), "avg_commit": Summary(commit, 0.05, 5),
               "step_ms": Summary(float(step), 1.0, 5)}
    return CaseBaseline("padding", context, 600, metrics, {})


def make_baseline(**changes: Any) -> Baseline:
    cases = {c.id: c for c in (case(3333, 77.9, 7.90, 101), case(5553, 54.5, 7.85, 144))}
    base = Baseline(
        deployment="kimi", version=1, created="2026-11-29T00:00:00Z", suite_version="0.1.0",
        git_revision="abc123", fingerprint=dict(FINGERPRINT), provenance="test", simulated=False,
        cases=cases, fits={"padding": ContextFit(30.0, 0.0195, 1.5, 4)}, tolerances={})
    return replace(base, **changes)


def write_raw(root: Path, name: str, data: Any) -> Path:
    path = root / "kimi" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return path


# --- the file format ----------------------------------------------------------------------


def test_round_trip_is_exact() -> None:
    original = make_baseline(tolerances={"slope": 0.2})
    original.cases["padding-ctx3333"].tolerances["step_ms"] = 0.15
    text = original.to_json()
    assert Baseline.from_json(text, "v1.json") == original
    assert Baseline.from_json(text, "v1.json").to_json() == text


def test_file_is_sorted_indented_and_self_describing() -> None:
    text = make_baseline().to_json()
    assert text.endswith("}\n")
    assert text.startswith('{\n  "about": ')
    data = json.loads(text)
    assert list(data) == sorted(data)
    assert data["schema_version"] == SCHEMA_VERSION
    step = data["cases"]["padding-ctx5553"]["metrics"]["step_ms"]
    assert step == {"median": 144, "mad": 1.0, "n": 5, "direction": "lower_is_better",
                    "tolerance": 0.1}
    assert data["cases"]["padding-ctx5553"]["metrics"]["tok_s"]["direction"] == "higher_is_better"


def test_from_run_summarises_the_measurements() -> None:
    samples = tuple(
        Sample("padding-ctx13", i, False, 13, 600, wall, 127, wall - 0.1, 0.1, 4.72, 0, "response",
               "length") for i, wall in enumerate((4.2, 4.3, 4.4)))
    measurement = Measurement(Case("padding", 13, 600), samples, "server", "response")
    base = Baseline.from_run("sim", {"model": "m"}, [measurement], {}, version=3,
                             suite_version="0.1.0", git_revision="x", provenance="run",
                             simulated=True)
    stored = base.cases["padding-ctx13"]
    assert stored.metrics["tok_s"].median == pytest.approx(600 / 4.3)
    assert stored.metrics["tok_s"].n == 3
    assert set(stored.metrics) == {"tok_s", "decode_tok_s", "step_ms", "avg_commit", "ttft_ms"}
    assert base.created.endswith("Z") and base.version == 3 and base.simulated


def test_invalid_json_names_the_file() -> None:
    with pytest.raises(BaselineError) as info:
        Baseline.from_json("{not json", "baselines/kimi/v1.json")
    message = str(info.value)
    assert message.startswith("baseline baselines/kimi/v1.json is not valid JSON (")
    assert message.endswith("): restore it from git or write a new version with "
                            "--specperf-update-baselines.")


def test_wrong_schema_names_the_file() -> None:
    data = json.loads(make_baseline().to_json())
    data["schema_version"] = 3
    with pytest.raises(BaselineError) as info:
        Baseline.from_json(json.dumps(data), "b/v1.json")
    assert str(info.value) == ("baseline b/v1.json: schema_version is 3, this specperf reads "
                               "1 and 2: restore it from git or write a new version with "
                               "--specperf-update-baselines.")


def test_missing_key_names_the_key() -> None:
    data = json.loads(make_baseline().to_json())
    del data["cases"]["padding-ctx3333"]["metrics"]["tok_s"]["median"]
    with pytest.raises(BaselineError) as info:
        Baseline.from_json(json.dumps(data), "b/v1.json")
    assert str(info.value) == ("baseline b/v1.json: cases.padding-ctx3333.metrics.tok_s.median "
                               "is missing: restore it from git or write a new version with "
                               "--specperf-update-baselines.")


@pytest.mark.parametrize(("mutate", "fragment"), [
    (lambda d: d.update(version="1"), "version should be an integer, found '1'"),
    (lambda d: d.update(simulated=1), "simulated should be true or false, found 1"),
    (lambda d: d["fits"]["padding"].update(a_ms=None), "fits.padding.a_ms should be a number"),
    (lambda d: d.update(tolerances={"tok": 0.1}), "tolerances.tok is not a known tolerance"),
    (lambda d: d.update(tolerances={"tok_s": 2}), "tolerances.tok_s is 2, outside (0, 1]"),
    (lambda d: d["cases"].update({"padding-ctx1": d["cases"]["padding-ctx3333"]}),
     "cases.padding-ctx1 describes case padding-ctx3333, not padding-ctx1"),
    (lambda d: d["cases"]["padding-ctx3333"]["metrics"]["step_ms"].update(
        direction="higher_is_better"), "step_ms is lower_is_better"),
])
def test_wrong_types_and_conflicts(mutate: Any, fragment: str) -> None:
    data = json.loads(make_baseline().to_json())
    mutate(data)
    with pytest.raises(BaselineError, match="^baseline b/v1.json: ") as info:
        Baseline.from_json(json.dumps(data), "b/v1.json")
    assert fragment in str(info.value)


# --- the store ----------------------------------------------------------------------------


def test_missing_baseline_says_how_to_create_one(tmp_path: Path) -> None:
    with pytest.raises(BaselineError) as info:
        BaselineStore(tmp_path).load("kimi")
    assert str(info.value) == (f"no baseline for deployment 'kimi' in {tmp_path / 'kimi'}: "
                               f"create one with `pytest perf_tests -m context_scaling "
                               f"--specperf-update-baselines` against a quiet server.")


def test_write_load_and_versions(tmp_path: Path) -> None:
    store = BaselineStore(tmp_path)
    first = store.write_next(make_baseline(version=7))
    second = store.write_next(make_baseline())
    assert (first.name, second.name) == ("v1.json", "v2.json")
    assert store.versions("kimi") == [1, 2]
    assert store.latest("kimi") == 2
    assert store.load("kimi").version == 2
    assert store.load("kimi", 1) == make_baseline(version=1)
    with pytest.raises(BaselineError, match=r"baseline v5 of 'kimi' does not exist .*"
                                            r"\(versions: 1, 2\)"):
        store.load("kimi", 5)


def test_write_next_never_overwrites(tmp_path: Path) -> None:
    store = BaselineStore(tmp_path)
    v1 = store.write_next(make_baseline())
    v1_bytes = v1.read_bytes()
    taken = write_raw(tmp_path, "v2.json", "precious, not a baseline")
    path = store.write_next(make_baseline(provenance="second"))
    assert path.name == "v3.json"
    assert v1.read_bytes() == v1_bytes
    assert taken.read_text() == "precious, not a baseline"
    assert store.load("kimi", 3).provenance == "second"
    leftovers = {p.name for p in path.parent.iterdir()} - {"v1.json", "v2.json", "v3.json"}
    assert leftovers <= {".write.lock"}


def test_concurrent_threads_get_distinct_versions(tmp_path: Path) -> None:
    store = BaselineStore(tmp_path)
    paths: list[Path] = []

    def write(i: int) -> None:
        paths.append(BaselineStore(tmp_path).write_next(make_baseline(provenance=f"t{i}")))

    threads = [threading.Thread(target=write, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(p.name for p in paths) == sorted(f"v{i}.json" for i in range(1, 9))
    assert sorted(store.load("kimi", v).provenance for v in store.versions("kimi")) == sorted(
        f"t{i}" for i in range(8))


WRITER = """
import sys
from pathlib import Path
from specperf.baselines.store import Baseline, BaselineStore
base = Baseline.from_json(Path(sys.argv[2]).read_text(), sys.argv[2])
print(BaselineStore(Path(sys.argv[1])).write_next(base).name)
"""


def test_concurrent_processes_get_distinct_versions(tmp_path: Path) -> None:
    template = tmp_path / "template.json"
    template.write_text(make_baseline().to_json())
    src = str(Path(specperf.__file__).parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path / "root"),
                               str(template)], stdout=subprocess.PIPE, env=env, text=True)
             for _ in range(5)]
    names = [p.communicate(timeout=60)[0].strip() for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert sorted(names) == [f"v{i}.json" for i in range(1, 6)]
    assert BaselineStore(tmp_path / "root").versions("kimi") == [1, 2, 3, 4, 5]


def test_corrupt_file_in_store_names_it(tmp_path: Path) -> None:
    path = write_raw(tmp_path, "v1.json", "{")
    with pytest.raises(BaselineError, match=f"^baseline {path} is not valid JSON"):
        BaselineStore(tmp_path).load("kimi")


def test_misplaced_file_is_a_conflict(tmp_path: Path) -> None:
    path = write_raw(tmp_path, "v2.json", make_baseline(version=1).to_json())
    with pytest.raises(BaselineError) as info:
        BaselineStore(tmp_path).load("kimi")
    assert str(info.value) == (f"baseline {path} says it is 'kimi' v1, which conflicts with its "
                               f"place: restore it from git or write a new version with "
                               f"--specperf-update-baselines.")


def test_unwritable_root_is_a_baseline_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(BaselineError, match="cannot write a baseline in .*--specperf-baseline-dir"):
        BaselineStore(blocker).write_next(make_baseline())


def test_deployment_name_must_be_a_plain_directory(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="deployment name '../x' cannot be a directory name"):
        BaselineStore(tmp_path).versions("../x")


def test_other_files_are_not_versions(tmp_path: Path) -> None:
    for name in ("v0.json", "v1.json.bak", "vx.json", ".tmp-1.json", "v01.json", "v4.json"):
        write_raw(tmp_path, name, "{}")
    assert BaselineStore(tmp_path).versions("kimi") == [4]
    assert BaselineStore(tmp_path).latest("elsewhere") is None


# --- names, fingerprints and change descriptions -------------------------------------------


def test_deployment_slug() -> None:
    assert deployment_slug(FINGERPRINT) == "kimi-k2.6-ddtree-kimi-k2.6-drafter"
    assert deployment_slug({"model": "Org/My Model_v2", "speculative_algorithm": None}) == (
        "my-model-v2")
    assert deployment_slug({}) == "unknown-deployment"


def test_fingerprint_differences() -> None:
    current = {**FINGERPRINT, "draft_model": "/models/drafter-v2", "page_size": 16,
               "version": None}
    assert fingerprint_differences({**FINGERPRINT, "gpus": "8x"}, current) == [
        "draft model: /models/Kimi-K2.6-Drafter/ → /models/drafter-v2",
        "page size: 1 → 16",
        "server version: 0.5.3 → unknown",
    ]
    assert fingerprint_differences({"simulated": False}, {"simulated": True}) == [
        "simulated: no → yes"]
    assert fingerprint_differences({}, {"simulated": None}) == []


def test_describe_changes() -> None:
    old = make_baseline()
    moved = dict(old.cases)
    moved["padding-ctx3333"] = case(3333, 80.1, 7.90, 98)
    del moved["padding-ctx5553"]
    moved["padding-ctx13"] = case(13, 139.6, 4.75, 34)
    new = make_baseline(cases=moved, fingerprint={**FINGERPRINT, "attention_backend": "fa3"},
                        fits={"padding": ContextFit(30.0, 0.0208, 1.5, 4)})
    assert describe_changes(old, new) == [
        "fingerprint attention backend: triton → fa3",
        "added padding-ctx13",
        "removed padding-ctx5553",
        "padding-ctx3333 tok/s 77.9 → 80.1 (+2.8%)",
        "padding-ctx3333 step time 101 → 98 ms (−3.0%)",
        "padding step time per 1k context 19.5 → 20.8 ms (+6.7%)",
    ]
    assert describe_changes(old, old) == []
    assert describe_changes(None, old) == [
        "first baseline of kimi: 2 cases (padding-ctx3333, padding-ctx5553)."]
