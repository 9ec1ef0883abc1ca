"""Option validation happens once, at startup, as a usage error naming where the value came
from (flag, environment variable, ini key); README's ini examples work in both ini files.

Plus the small things a user sees: the progress line past the planned repeats, baseline
diffs, the command's --help and a subcommand's usage errors.
"""

from __future__ import annotations

import re
import signal
from pathlib import Path

import pytest

from inprocess import NO_HYPOTHESIS
from specperf import cli
from specperf.baselines.diff import _small_percent
from specperf.core import stop as core_stop
from specperf.core.errors import ConfigError
from specperf.measure.sample import Sample
from specperf.plugin.signals import StopOnce
from specperf.settings.config import resolve
from specperf.settings.options import OPTIONS, OPTIONS_BY_NAME
from specperf.views.summary import sample_line

ROOT = Path(__file__).resolve().parents[1]
# README and the docs pages it links (the options' ini examples live in docs/options.md).
README = "\n".join(p.read_text() for p in [ROOT / "README.md",
                                            *sorted((ROOT / "docs").glob("*.md"))])
PERF_TEST = "import pytest\n\n@pytest.mark.context_scaling\ndef test_x(perf_case):\n    pass\n"


def _project(pytester: pytest.Pytester, ini_name: str, ini_text: str) -> None:
    pytester.makefile(Path(ini_name).suffix, **{Path(ini_name).stem: ini_text})
    pytester.makepyfile(test_perf=PERF_TEST)


@pytest.mark.parametrize(("args", "message"), [
    (["--contexts", "13,,20"],
     "ERROR: --contexts = '13,,20' is not valid: expected comma-separated positive integers."),
    (["--text-classes", "padding,"],
     "ERROR: --text-classes = 'padding,' is not valid: expected comma-separated class names."),
    (["--sim-profile", "nosuch"],
     "ERROR: --sim-profile = 'nosuch' is not valid: unknown profile 'nosuch'; shipped profiles: "
     "*."),
])
def test_a_bad_flag_is_one_usage_error(pytester, args, message):
    pytester.makepyfile(test_perf=PERF_TEST)
    result = pytester.runpytest_inprocess(*NO_HYPOTHESIS, *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])
    assert len(re.findall("is not valid", result.stderr.str())) == 1
    assert "Traceback" not in result.stderr.str()


def test_a_bad_environment_variable_names_itself(pytester, monkeypatch):
    monkeypatch.setenv("SPECPERF_SIM_PROFILE", "nosuch")
    pytester.makepyfile(test_perf=PERF_TEST)
    result = pytester.runpytest_inprocess(*NO_HYPOTHESIS)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: SPECPERF_SIM_PROFILE = 'nosuch' is not valid: *"])


@pytest.mark.parametrize(("ini_name", "ini_text", "message"), [
    ("pytest.ini", "[pytest]\nspecperf_tolerances = step_ms = 0.15, tok = 0.1\n",
     "ERROR: ini specperf_tolerances: 'tok = 0.1' names no tolerance: expected one of "
     "avg_commit, decode_tok_s, slope, step_ms, tok_s, ttft_ms as 'metric = fraction', e.g. "
     "step_ms = 0.15."),
    ("pyproject.toml", '[tool.pytest.ini_options]\nspecperf_tolerances = ["step_ms = 15"]\n',
     "ERROR: ini specperf_tolerances: 'step_ms = 15' is not valid: expected 'metric = "
     "fraction' with a fraction in (0, 1], e.g. step_ms = 0.15 for 15%."),
    ("pytest.ini", "[pytest]\nspecperf_contexts = 13,,20\n",
     "ERROR: ini specperf_contexts = '13,,20' is not valid: expected comma-separated positive "
     "integers."),
])
def test_a_bad_ini_value_is_one_usage_error_naming_the_key(pytester, ini_name, ini_text,
                                                           message):
    _project(pytester, ini_name, ini_text)
    result = pytester.runpytest_inprocess(*NO_HYPOTHESIS, "--collect-only")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


def _readme_block(language: str) -> str:
    inside = "(?:(?!```).)*?"  # within one fenced block
    found = re.search(rf"```{language}\n(# [^\n]*\n)?({inside}specperf_tolerances{inside})```",
                      README, re.DOTALL)
    assert found, f"README and docs/ have no {language} block with specperf_tolerances"
    return found.group(2)


@pytest.mark.parametrize(("ini_name", "language"), [("pytest.ini", "ini"),
                                                    ("pyproject.toml", "toml")])
def test_readme_ini_examples_are_valid_where_they_say(pytester, ini_name, language):
    _project(pytester, ini_name, _readme_block(language))
    pytester.makeconftest(
        "from specperf.plugin.fixtures import STATE\n\n"
        "def pytest_collection_finish(session):\n"
        "    tolerances = session.config.stash[STATE].settings.tolerances\n"
        "    print('TOLERANCES', sorted(tolerances.items()))\n")
    result = pytester.runpytest_inprocess(*NO_HYPOTHESIS, "--collect-only", "-s")
    assert result.ret == pytest.ExitCode.OK, result.stderr.str()
    result.stdout.fnmatch_lines(["TOLERANCES [('step_ms', 0.15), ('tok_s', 0.08)]"])


def test_tolerance_lines_parse_per_line_and_comma_separated():
    lines = ["step_ms = 0.15", "tok_s=0.08, slope = 1"]
    want = {"step_ms": 0.15, "tok_s": 0.08, "slope": 1.0}
    assert resolve({}, {}, {"tolerances": lines}).tolerances == want
    assert resolve({}, {}, {"tolerances": "\n".join(lines)}).tolerances == want
    with pytest.raises(ConfigError, match=r"^ini specperf_tolerances: 'step_ms' is not valid"):
        resolve({}, {}, {"tolerances": ["step_ms"]})


def test_tolerances_cli_beats_env_beats_ini_each_replacing_the_whole_value():
    ini = {"tolerances": ["step_ms = 0.15", "tok_s = 0.08"]}
    env = {"SPECPERF_TOLERANCES": "slope=0.3"}
    s = resolve({"tolerances": "step_ms=0.2"}, env, ini)
    assert (dict(s.tolerances), s.sources["tolerances"]) == ({"step_ms": 0.2},
                                                             "--specperf-tolerances")
    s = resolve({}, env, ini)
    assert (dict(s.tolerances), s.sources["tolerances"]) == ({"slope": 0.3},
                                                             "SPECPERF_TOLERANCES")
    s = resolve({}, {}, ini)
    assert dict(s.tolerances) == {"step_ms": 0.15, "tok_s": 0.08}
    assert s.sources["tolerances"] == "ini specperf_tolerances"
    s = resolve({}, {}, {})
    assert (dict(s.tolerances), s.sources["tolerances"]) == ({}, "default")


@pytest.mark.parametrize(("cli", "env", "message"), [
    ({"tolerances": "step_ms=0.15,tok=0.1"}, {},
     "--specperf-tolerances: 'tok=0.1' names no tolerance: expected one of avg_commit, "
     "decode_tok_s, slope, step_ms, tok_s, ttft_ms as 'metric = fraction', e.g. step_ms = 0.15."),
    ({}, {"SPECPERF_TOLERANCES": "step_ms=15"},
     "SPECPERF_TOLERANCES: 'step_ms=15' is not valid: expected 'metric = fraction' with a "
     "fraction in (0, 1], e.g. step_ms = 0.15 for 15%."),
])
def test_a_bad_tolerance_names_its_source(cli, env, message):
    with pytest.raises(ConfigError) as err:
        resolve(cli, env, {})
    assert str(err.value) == message


def test_tolerances_flag_and_variable_reach_the_run(pytester, monkeypatch):
    _project(pytester, "pytest.ini", "[pytest]\nspecperf_tolerances =\n    step_ms = 0.15\n"
                                     "    tok_s = 0.08\n")
    pytester.makeconftest(
        "from specperf.plugin.fixtures import STATE\n\n"
        "def pytest_collection_finish(session):\n"
        "    s = session.config.stash[STATE].settings\n"
        "    print('TOLERANCES', sorted(s.tolerances.items()), s.sources['tolerances'])\n")
    ini = pytester.runpytest_inprocess(*NO_HYPOTHESIS, "--collect-only", "-s")
    ini.stdout.fnmatch_lines(["TOLERANCES [('step_ms', 0.15), ('tok_s', 0.08)] "
                              "ini specperf_tolerances"])
    monkeypatch.setenv("SPECPERF_TOLERANCES", "slope=0.3")
    env = pytester.runpytest_inprocess(*NO_HYPOTHESIS, "--collect-only", "-s")
    env.stdout.fnmatch_lines(["TOLERANCES [('slope', 0.3)] SPECPERF_TOLERANCES"])
    flag = pytester.runpytest_inprocess(*NO_HYPOTHESIS, "--collect-only", "-s", "--tolerances",
                                         "step_ms=0.2,decode_tok_s=0.12")
    flag.stdout.fnmatch_lines(["TOLERANCES [('decode_tok_s', 0.12), ('step_ms', 0.2)] "
                               "--tolerances"])


def test_help_shows_the_tolerances_flag_once_with_its_env_and_ini(pytester):
    text = pytester.runpytest_inprocess(*NO_HYPOTHESIS, "--help").stdout.str()
    flat = " ".join(text.split())
    assert len(re.findall(r"^  --specperf-tolerances=TOLERANCES", text, re.M)) == 1
    assert ("Tolerance overrides, 'metric=fraction' comma separated (in ini also one per "
            "line), e.g. step_ms=0.15,tok_s=0.08;") in flat
    assert ("[env SPECPERF_TOLERANCES, ini specperf_tolerances; old name --tolerances]"
            in flat)
    # The ini key is registered once, as a line list (pytest lists ini keys under --help too).
    assert len(re.findall(r"^  specperf_tolerances \(linelist\)", text, re.M)) == 1


def test_help_shows_the_verdict_contract_options_with_their_env_and_ini(pytester):
    text = pytester.runpytest_inprocess(*NO_HYPOTHESIS, "--help").stdout.str()
    flat = " ".join(text.split())
    for name in ("sweep_tolerance", "sweep_effect", "acceptance_mode"):
        flag = f"--specperf-{name.replace('_', '-')}={name.upper()}"
        assert len(re.findall(rf"^  {flag}", text, re.M)) == 1
        assert (f"[env SPECPERF_{name.upper()}, ini specperf_{name}; old name "
                f"--{name.replace('_', '-')}]") in flat
    assert ("The sweep-level test's tolerance: a step-time or acceptance change across the whole "
            "sweep up to this fraction passes (a sure change inside it is noted, never a "
            "failure)") in flat
    assert "'identical' fails on any prompt whose verify steps changed" in flat


def test_the_sweep_effect_must_lie_above_the_sweep_tolerance():
    s = resolve({}, {}, {})
    assert (s.sweep_tolerance, s.sweep_effect, s.acceptance_mode) == (0.02, 0.05, "tolerance")
    with pytest.raises(ConfigError) as err:
        resolve({"sweep_tolerance": "0.05"}, {"SPECPERF_SWEEP_EFFECT": "0.04"}, {})
    assert str(err.value) == ("SPECPERF_SWEEP_EFFECT = 0.04 is not above "
                              "--specperf-sweep-tolerance = 0.05: expected the change to catch "
                              "above the change to let pass.")
    with pytest.raises(ConfigError, match=r"^--specperf-acceptance-mode = 'exact' is not "
                                          r"valid: expected one of tolerance, identical\.$"):
        resolve({"acceptance_mode": "exact"}, {}, {})


def test_contexts_with_an_empty_item_name_the_source():
    with pytest.raises(ConfigError) as err:
        resolve({}, {"SPECPERF_CONTEXTS": "13,,20"}, {})
    assert str(err.value) == ("SPECPERF_CONTEXTS = '13,,20' is not valid: expected "
                              "comma-separated positive integers.")


# -- papercuts ----------------------------------------------------------------------------------
def _sample(repeat: int) -> Sample:
    return Sample(case_id="padding-ctx13", repeat=repeat, warmup=False, prompt_tokens=13,
                  completion_tokens=600, wall_s=4.0, verify_steps=127, decode_s=3.9,
                  ttft_s=0.05, server_accept_length=4.7, cached_tokens=0,
                  acceptance_source="response", finish_reason="length")


def test_progress_past_the_planned_repeats_says_extra_not_4_of_3():
    assert sample_line(_sample(2), 3).startswith("padding-ctx13 repeat 3/3: ")
    assert sample_line(_sample(3), 3).startswith(
        "padding-ctx13 extra repeat 4 (noisy or near its limit): ")


def test_a_change_too_small_for_one_decimal_is_not_printed_as_plus_zero():
    assert _small_percent(47.349 / 47.35 - 1) == "less than 0.1%"  # shown as 47.4 → 47.3
    assert _small_percent(-0.002) == "−0.2%"


def test_help_is_plain_text_and_a_subcommand_shows_its_own_usage(capsys):
    assert cli.main(["--help"]) == 0
    assert "``" not in capsys.readouterr().out
    assert cli.main(["gate", "--bogus"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: specperf gate ")
    assert err.rstrip().endswith("specperf gate: error: unrecognized arguments: --bogus")


@pytest.fixture
def fresh_stop():
    core_stop.reset()
    yield
    core_stop.reset()  # a pending stop would interrupt this worker's later measurements


def test_only_the_first_stop_signal_interrupts(capfd, fresh_stop):
    stop = StopOnce()
    with pytest.raises(KeyboardInterrupt, match="specperf: stopped by signal 2"):
        stop(signal.SIGINT, None)
    stop(signal.SIGINT, None)  # as `timeout -s INT` sends it again: acknowledged, no raise
    assert capfd.readouterr().err == ("specperf: already stopping: releasing the GPU lock and "
                                      "writing the report (SIGKILL ends it at once)\n")


def test_a_stop_is_raised_again_until_the_run_acts_on_it(fresh_stop):
    core_stop.check()  # nothing asked: no raise
    with pytest.raises(KeyboardInterrupt):
        StopOnce()(signal.SIGTERM, None)
    # Lost in a finalizer, say: the next check raises it again, with the same signal.
    with pytest.raises(KeyboardInterrupt, match="specperf: stopped by signal 15"):
        core_stop.check()
    assert core_stop.pending()
    core_stop.acted_on()  # pytest caught it and is closing the session
    core_stop.check()
    assert not core_stop.pending()


# -- prefixed flags, old names as aliases ------------------------------------------------------
def _specperf_flags(text: str) -> list[str]:
    """The flags --help lists in specperf's group (each at the start of its line)."""
    group = text.split("specperf: speculative-decoding performance:", 1)[1]
    group = re.split(r"\n\S", group, maxsplit=1)[0]  # up to the next group's title
    return re.findall(r"^  (--[\w-]+)", group, re.M)


def test_every_flag_is_prefixed_and_its_old_name_documented_as_an_alias(pytester):
    text = pytester.runpytest_inprocess(*NO_HYPOTHESIS, "--help").stdout.str()
    flat = " ".join(text.split())
    shown = _specperf_flags(text)
    assert shown == [opt.flag for opt in OPTIONS]
    assert all(flag.startswith("--specperf-") for flag in shown)
    aliased = [opt for opt in OPTIONS if opt.alias is not None]
    assert len(aliased) == 35 and all(opt.alias == "--" + opt.name.replace("_", "-")
                                      for opt in aliased)
    for opt in aliased:  # listed in its option's help, never as a flag of its own
        assert f"ini {opt.ini}; old name {opt.alias}]" in flat
        assert not re.search(rf"^  {opt.alias}[= \n]", text, re.M)


CONFTEST_MODEL = (
    "def pytest_addoption(parser):\n"
    "    parser.addoption('--model', dest='their_model', default=None)\n\n"
    "def pytest_collection_finish(session):\n"
    "    from specperf.plugin.fixtures import STATE\n"
    "    s = session.config.stash[STATE].settings\n"
    "    print('THEIRS', session.config.getoption('their_model'), 'OURS', s.model,\n"
    "          s.sources['model'], 'REPEATS', s.repeats, s.sources['repeats'])\n")


@pytest.mark.parametrize("how", ["conftest", "plugin"])
def test_another_plugins_model_flag_beside_ours_starts_and_each_gets_its_own(pytester, how):
    if how == "conftest":
        pytester.makeconftest(CONFTEST_MODEL)
        loaded: tuple[str, ...] = ()
    else:  # a plugin module loaded with -p, as an installed plugin would be
        pytester.makepyfile(other_plugin=CONFTEST_MODEL)
        pytester.syspathinsert()
        loaded = ("-p", "other_plugin")
    pytester.makepyfile(test_perf=PERF_TEST)
    result = pytester.runpytest_inprocess(*NO_HYPOTHESIS, *loaded, "--collect-only", "-s",
                                          "--model", "theirs", "--specperf-model", "ours",
                                          "--repeats", "4")
    assert result.ret == pytest.ExitCode.OK, result.stderr.str()
    # --model is the other plugin's; ours answers to its prefixed name; --repeats, which nobody
    # else claims, still reaches specperf under its old name.
    result.stdout.fnmatch_lines(["THEIRS theirs OURS ours --specperf-model REPEATS 4 --repeats"])


def test_a_bad_value_names_the_spelling_it_was_given_with(pytester):
    pytester.makepyfile(test_perf=PERF_TEST)
    for flag in ("--specperf-output-tokens", "--output-tokens"):
        result = pytester.runpytest_inprocess(*NO_HYPOTHESIS, flag, "many")
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        result.stderr.fnmatch_lines(
            [f"ERROR: {flag} = 'many' is not valid: expected a positive integer."])


def test_the_same_night_flag_has_no_old_name_and_defaults_off():
    assert OPTIONS_BY_NAME["same_night"].alias is None
    assert resolve({}, {}, {}).same_night is False
    s = resolve({}, {"SPECPERF_SAME_NIGHT": "1"}, {})
    assert (s.same_night, s.sources["same_night"]) == (True, "SPECPERF_SAME_NIGHT")
