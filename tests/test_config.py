"""Settings: precedence, parsing, and errors that name their source."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from inprocess import NO_HYPOTHESIS
from specperf.core.errors import ConfigError
from specperf.measure.session import PerfSession
from specperf.settings.config import resolve
from specperf.settings.options import OPTIONS


def test_defaults_are_the_incident_experiment():
    s = resolve({}, {}, {})
    assert s.contexts == (13, 1663, 3333, 5553)
    assert s.text_classes == ("padding", "reasoning")
    assert s.output_tokens == 600 and s.repeats == 3 and s.warmup == 1
    assert s.endpoint is None and s.simulated


def test_cli_beats_env_beats_ini():
    ini = {"repeats": "5", "output_tokens": "100", "contexts": "1,2"}
    env = {"SPECPERF_REPEATS": "4", "SPECPERF_OUTPUT_TOKENS": "200"}
    s = resolve({"repeats": "3"}, env, ini)
    assert s.repeats == 3 and s.sources["repeats"] == "--specperf-repeats"
    assert s.output_tokens == 200 and s.sources["output_tokens"] == "SPECPERF_OUTPUT_TOKENS"
    assert s.contexts == (1, 2) and s.sources["contexts"] == "ini specperf_contexts"


@pytest.mark.parametrize(("cli", "env", "ini", "message"), [
    ({"contexts": "13,abc"}, {}, {},
     "--specperf-contexts = '13,abc' is not valid: expected comma-separated positive integers."),
    ({}, {"SPECPERF_ENDPOINT": "localhost:30000"}, {},
     "SPECPERF_ENDPOINT = 'localhost:30000' is not valid: expected an http(s) URL such as "
     "http://127.0.0.1:30000"),
    ({}, {}, {"api": "grpc"},
     "ini specperf_api = 'grpc' is not valid: expected one of auto, sglang, openai, "
     "openai-chat, llamacpp."),
    ({"repeats": "5", "max_repeats": "2"}, {}, {},
     "--specperf-max-repeats = 2 is below --specperf-repeats = 5: expected max repeats >= "
     "repeats."),
    ({}, {}, {"max_spread": "1.5"},
     "ini specperf_max_spread = '1.5' is not valid: expected a number in (0, 1]."),
    ({"log_command": "journalctl -u sglang"}, {}, {},
     "--specperf-log-command = 'journalctl -u sglang' has no {since} placeholder"),
])
def test_bad_values_name_their_source(cli, env, ini, message):
    with pytest.raises(ConfigError) as err:
        resolve(cli, env, ini)
    assert message in str(err.value)


def test_named_cases_decode_their_own_length_and_the_rest_the_runs():
    from specperf.plan.workload import TextClass, plan

    s = resolve({"case_output_tokens": "padding-ctx13=128, reasoning-ctx13 = 64"}, {}, {})
    assert s.case_output_tokens == {"padding-ctx13": 128, "reasoning-ctx13": 64}
    cases = plan([TextClass("padding", "repeat"), TextClass("reasoning", "prose")], (13, 3333),
                 s.output_tokens, s.case_output_tokens)
    assert {c.id: c.output_tokens for c in cases} == {
        "padding-ctx13": 128, "padding-ctx3333": 600, "reasoning-ctx13": 64,
        "reasoning-ctx3333": 600}
    with pytest.raises(ConfigError) as err:
        resolve({}, {"SPECPERF_CASE_OUTPUT_TOKENS": "padding=128"}, {})
    assert "SPECPERF_CASE_OUTPUT_TOKENS" in str(err.value)
    assert "'padding=128' is not case=tokens (e.g. padding-ctx3333=128)" in str(err.value)


def test_named_cases_take_their_own_fewest_requests_and_the_bound_follows():
    from specperf.measure.loop import RunConfig

    s = resolve({"case_repeats": "padding-ctx13=32,reasoning-ctx3333=1"}, {}, {})
    run = RunConfig(s.repeats, s.max_repeats, s.warmup, s.request_timeout,
                    case_repeats=dict(s.case_repeats))
    assert run.bounds("padding-ctx13") == (32, 32)  # above --specperf-max-repeats: its own
    assert run.bounds("reasoning-ctx3333") == (1, 8)
    assert run.bounds("padding-ctx3333") == (3, 8)  # not named: the run's
    with pytest.raises(ConfigError, match="'padding-ctx13=0' is not case=requests"):
        resolve({"case_repeats": "padding-ctx13=0"}, {}, {})


def test_api_key_only_from_the_named_variable():
    # resolve is pure: the environment it sees is the mapping it is given, never os.environ.
    env = {"MY_KEY": "sk-secret"}
    s = resolve({"api_key_env": "MY_KEY"}, env, {})
    assert s.api_key(env) == "sk-secret"
    assert "sk-secret" not in repr(s.public_dict())
    with pytest.raises(ConfigError, match="names MY_KEY, which is not set"):
        resolve({"api_key_env": "MY_KEY"}, {}, {})


def test_an_unknown_lock_mode_is_refused_never_read_as_no_lock():
    with pytest.raises(ValueError, match="lock_mode 'off': expected one of"):
        PerfSession(resolve({}, {}, {}), lock_mode="off")  # type: ignore[arg-type]


def test_paths_are_paths():
    s = resolve({"baseline_dir": "~/b"}, {}, {})
    assert s.baseline_dir == Path("~/b").expanduser()


def test_every_option_is_documented_in_readme():
    root = Path(__file__).resolve().parents[1]
    readme = " ".join(p.read_text() for p in [root / "README.md", *(root / "docs").glob("*.md")])
    # Documented by its prefixed name, or (until README moves to them) by its old alias.
    missing = [o.flag for o in OPTIONS if o.flag not in readme
               and (o.alias is None or o.alias not in readme)]
    assert not missing, f"README does not document {missing}"


def test_help_lists_every_option_once(pytester):
    result = pytester.runpytest_inprocess(*NO_HYPOTHESIS, "--help")
    text = result.stdout.str()
    for opt in OPTIONS:
        assert len(re.findall(rf"^  {opt.flag}[= \n]", text, re.M)) == 1, opt.flag
    result.stdout.fnmatch_lines([
        "specperf: speculative-decoding performance:",
        "  --specperf-endpoint=ENDPOINT",
        "*Base URL of the server to measure; unset starts the*",
    ])


def test_bad_option_is_a_usage_error(pytester):
    result = pytester.runpytest_inprocess(*NO_HYPOTHESIS, "--output-tokens", "many")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*--output-tokens = 'many' is not valid: expected a positive integer.*"])
    assert "Traceback" not in result.stderr.str()


def test_unknown_text_class_is_a_usage_error(pytester):
    result = pytester.runpytest_inprocess(*NO_HYPOTHESIS, "--text-classes", "padding,poetry")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*unknown text class poetry: available are code, padding, "
                                 "reasoning; add one as a TOML file in "
                                 "--specperf-text-class-dir.*"])


def test_a_baseline_run_takes_at_least_baseline_repeats():
    from specperf.settings.config import for_baseline

    plain = resolve({"repeats": "3"}, {}, {})
    assert for_baseline(plain) == plain
    update = for_baseline(resolve({"repeats": "3", "update_baselines": True}, {}, {}))
    assert (update.repeats, update.max_repeats) == (10, 10)
    many = for_baseline(resolve({"repeats": "3", "max_repeats": "4", "update_baselines": True,
                                 "baseline_repeats": "6"}, {}, {}))
    assert (many.repeats, many.max_repeats) == (6, 6)
