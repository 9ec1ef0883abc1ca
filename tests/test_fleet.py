"""A fleet's pieces: the endpoints file and flags, clashing options, the schedule, the gate."""

from __future__ import annotations

from pathlib import Path

import pytest

from specperf.cli.decision import CaseOutcome, GateExit, GateResult, fleet_result
from specperf.cli.sentences import fleet_summary_lines
from specperf.core.errors import ConfigError
from specperf.fleet.schedule import scope_of
from specperf.settings.config import Settings, resolve
from specperf.settings.endpoints import (
    Endpoint,
    check_combination,
    endpoint_settings,
    from_flags,
    load_endpoints,
)


def _file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "fleet.toml"
    path.write_text(text)
    return path


def test_endpoints_file_with_every_key(tmp_path):
    path = _file(tmp_path, '[[endpoint]]\nname = "prod"\nurl = "http://10.0.0.1:30000/"\n'
                           'deployment = "kimi-prod"\nkey_env = "PROD_KEY"\n'
                           'lock = "/shared/prod.lock"\n\n'
                           '[[endpoint]]\nname = "box2"\nurl = "https://box2:443"\n')
    found = load_endpoints(path, {"PROD_KEY": "sk-1"})
    assert found == (Endpoint("prod", "http://10.0.0.1:30000", "kimi-prod", "PROD_KEY",
                              Path("/shared/prod.lock")),
                     Endpoint("box2", "https://box2:443", "box2"))


@pytest.mark.parametrize("text, message", [
    ("", "endpoints file {p} has no [[endpoint]] table: add one per box with at least name "
         "and url."),
    ("[[endpoint]]\nname = \"a\"\nurl = \"http://h:1\"\nport = 3\n",
     "endpoints file {p}, endpoint #1 has unknown key(s) port: expected name, url, "
     "deployment, key_env, lock."),
    ("[[endpoint]]\nname = \"box-2\"\nurl = \"http://h:1\"\n",
     "endpoints file {p}, endpoint #1 has name 'box-2': expected a name of letters, digits, "
     "'_' and '.' only, e.g. name = \"box2\"."),
    ("[[endpoint]]\nname = \"a\"\n",
     "endpoints file {p}, endpoint 'a' has url None: expected an http(s) URL such as "
     "http://127.0.0.1:30000."),
    ("[[endpoint]]\nname = \"a\"\nurl = \"ftp://h\"\n",
     "endpoints file {p}, endpoint 'a' has url 'ftp://h': expected an http(s) URL such as "
     "http://127.0.0.1:30000."),
    ("[[endpoint]]\nname = \"a\"\nurl = \"http://h:1\"\nkey_env = \"NOPE_KEY\"\n",
     "endpoints file {p}, endpoint 'a' names key_env NOPE_KEY, which is not set in the "
     "environment: export NOPE_KEY with the key, or drop key_env."),
    ("[[endpoint]]\nname = \"a\"\nurl = \"http://h:1\"\n[[endpoint]]\nname = \"a\"\n"
     "url = \"http://h:2\"\n",
     "endpoints file {p} names name 'a' twice: each box of a fleet needs its own name."),
    ("[[endpoint]]\nname = \"a\"\nurl = \"http://h:1\"\n[[endpoint]]\nname = \"b\"\n"
     "url = \"http://h:1/\"\n",
     "endpoints file {p} names url 'http://h:1' twice: each box of a fleet needs its own url."),
    ("endpoints = 1\n", "endpoints file {p} has unknown top-level key(s) endpoints: expected "
                        "only [[endpoint]] tables."),
])
def test_endpoints_file_errors_name_file_and_entry(tmp_path, text, message):
    path = _file(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_endpoints(path, {})
    assert str(info.value) == message.format(p=path)


def test_endpoints_file_not_toml_or_missing(tmp_path):
    path = _file(tmp_path, "[[endpoint]\n")
    with pytest.raises(ConfigError, match=r"^endpoints file .* is not valid TOML \(.*\): fix "
                                          r"the syntax \(one \[\[endpoint\]\] table per box\)\.$"):
        load_endpoints(path, {})
    with pytest.raises(ConfigError) as info:
        load_endpoints(tmp_path / "nope.toml", {})
    assert str(info.value) == (f"endpoints file {tmp_path / 'nope.toml'} cannot be read (No such "
                               "file or directory): check the path given to --endpoints.")


def test_repeated_endpoint_flags():
    found = from_flags(["box1=http://127.0.0.1:30000", "http://10.0.0.2:30000"])
    assert found == (Endpoint("box1", "http://127.0.0.1:30000", "box1"),
                     Endpoint("10.0.0.2_30000", "http://10.0.0.2:30000", "10.0.0.2_30000"))
    with pytest.raises(ConfigError) as info:
        from_flags(["box-1=http://h:1"])
    assert str(info.value) == ("--endpoint box-1=http://h:1: the name 'box-1' is not valid: "
                               "expected NAME=URL with a name of letters, digits, '_' and '.' "
                               "only, e.g. --specperf-endpoint box2=http://h:30000.")


@pytest.mark.parametrize("cli, message", [
    ({"deployment": "x"}, "--specperf-deployment names one endpoint and cannot apply to a fleet: "
                          "give "
                          "each endpoint its deployment in the endpoints file."),
    ({"gpu_lock": "/tmp/x.lock"}, "--specperf-gpu-lock names one endpoint and cannot apply to a "
                                  "fleet: "
                                  "give each endpoint its lock in the endpoints file."),
])
def test_single_endpoint_options_clash_with_a_fleet(cli, message):
    with pytest.raises(ConfigError) as info:
        check_combination(resolve(cli, {}, {}))
    assert str(info.value) == message


def test_endpoint_settings_carry_the_entry():
    base = resolve({}, {}, {})
    ep = Endpoint("prod", "http://h:1", "kimi-prod", None, Path("/l/prod.lock"))
    s = endpoint_settings(base, ep, "endpoints file f.toml (prod)")
    assert (s.endpoint, s.deployment, s.gpu_lock) == ("http://h:1", "kimi-prod",
                                                      Path("/l/prod.lock"))
    assert s.sources["endpoint"] == "endpoints file f.toml (prod)"
    assert isinstance(s, Settings) and s.contexts == base.contexts


def test_schedule_scope_is_the_endpoint():
    names = frozenset({"box2", "prod"})
    assert scope_of("perf_tests/t.py::test_x[box2-reasoning-ctx3333]", names) == \
        "specperf-endpoint:box2"
    assert scope_of("perf_tests/t.py::test_fit[prod-reasoning]@prod", names) == \
        "specperf-endpoint:prod"
    assert scope_of("perf_tests/t.py::test_x[reasoning-ctx13]", names) == \
        "perf_tests/t.py::test_x[reasoning-ctx13]"
    assert scope_of("tests/t.py::test_plain", names) == "tests/t.py::test_plain"


def _cases(endpoint: str, *outcomes: str) -> list[CaseOutcome]:
    return [CaseOutcome(f"case{i}", o, "BaselineError: x" if o == "error" else "",
                        endpoint=endpoint) for i, o in enumerate(outcomes)]


def test_fleet_gate_exits_with_the_worst_endpoint_and_names_it():
    cases = _cases("a", "passed", "passed") + _cases("b", "passed", "failed") \
        + _cases("c", "passed", "passed")
    result = fleet_result(1, GateResult(GateExit.REGRESSION, "x", tuple(cases)))
    assert result.code == GateExit.REGRESSION
    assert result.reason == "endpoint b decides: 1 of 2 smoke cases regressed: block the deploy."
    lines = fleet_summary_lines(result, "the fleet in f.toml")
    assert lines[-1] == ("specperf gate: fleet (the fleet in f.toml): exit 1: endpoint b "
                         "decides: 1 of 2 smoke cases regressed: block the deploy.")
    assert "  2 smoke checks (2 cases) against endpoint a" in lines


def test_fleet_gate_infrastructure_beats_regression():
    cases = _cases("a", "failed") + _cases("b", "error") + _cases("c", "passed")
    result = fleet_result(1, GateResult(GateExit.INFRASTRUCTURE, "x", tuple(cases)))
    assert result.code == GateExit.INFRASTRUCTURE
    assert result.reason.startswith("endpoint b decides: 1 of 1 smoke checks could not be "
                                    "measured")


def test_fleet_gate_passes_only_when_every_endpoint_passes():
    cases = _cases("a", "passed") + _cases("b", "passed")
    result = fleet_result(0, GateResult(GateExit.PASS, "x", tuple(cases)))
    assert (result.code, result.reason) == (GateExit.PASS, "every endpoint passed (a, b).")


def test_fleet_ids_and_single_endpoint_ids(perf_project, tmp_path):
    project = perf_project()
    fleet = _file(tmp_path, '[[endpoint]]\nname = "prod"\nurl = "http://127.0.0.1:1"\n'
                            '[[endpoint]]\nname = "box2"\nurl = "http://127.0.0.1:2"\n')
    result = project.run_inprocess("--collect-only", "-q", "-m", "context_scaling",
                                   "--specperf-contexts=3333", "--specperf-text-classes=reasoning",
                                   "--endpoints", str(fleet))
    assert result.ret == 0
    assert _ids(result) == ["test_context_scaling[prod-reasoning-ctx3333]",
                            "test_context_fit[prod-reasoning]",
                            "test_context_scaling[box2-reasoning-ctx3333]",
                            "test_context_fit[box2-reasoning]"]
    assert "specperf fleet" not in result.stdout.str()  # collecting measures nothing
    one = project.run_inprocess("--collect-only", "-q", "-m", "context_scaling",
                                "--specperf-contexts=3333", "--specperf-text-classes=reasoning",
                                "--endpoint", "http://127.0.0.1:1")
    assert _ids(one) == ["test_context_scaling[reasoning-ctx3333]",
                         "test_context_fit[reasoning]"]


def _ids(result: pytest.RunResult) -> list[str]:
    return [line.split("::", 1)[1] for line in result.stdout.lines if "::" in line]


@pytest.mark.parametrize("args, message", [
    (("-n", "2", "--dist", "loadscope"),
     "ERROR: --dist loadscope would split an endpoint's cases over workers that measure it at "
     "once: run a fleet with -n N alone (specperf then gives each endpoint's cases to one "
     "worker) or --dist loadgroup."),
    (("--specperf-update-baselines",),
     "ERROR: --specperf-update-baselines writes one deployment's baseline and cannot run over a "
     "fleet: write each endpoint's baseline with its own run, e.g. `pytest --pyargs "
     "specperf.perf_tests -m context_scaling --specperf-endpoint URL --specperf-deployment NAME "
     "--specperf-update-baselines`."),
    (("--endpoint", "a=http://127.0.0.1:3"),
     "ERROR: a fleet is given either by --endpoints FILE or by --endpoint NAME=URL more than "
     "once, not both: put every endpoint in the file."),
])
def test_fleet_usage_errors_are_one_sentence(perf_project, tmp_path, args, message):
    fleet = _file(tmp_path, '[[endpoint]]\nname = "prod"\nurl = "http://127.0.0.1:1"\n')
    result = perf_project().run_inprocess("-m", "context_scaling", "--endpoints", str(fleet),
                                          *args)
    assert result.ret == 4  # pytest's usage error
    assert message in result.stderr.lines, result.stderr.str()
