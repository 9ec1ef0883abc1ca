"""specperf explain, offline and its errors: the incident's numbers against the shipped real-box
baseline, a step-time and an acceptance regression, and one sentence per error with the gate's
exit codes."""

from __future__ import annotations

import argparse
import http.server
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from loopback import serving
from sim_fixtures import SimProcess
from specperf.cli import explain as cli
from specperf.judge.explain import prediction
from specperf.servers.livemetrics import NO_TRAFFIC
from specperf.views.screen import WIDTH, wrap

BASELINES = Path(__file__).resolve().parents[1] / "baselines"
REAL_BOX = "kimi-k26-ddtree-8xpro6000"
OFFLINE = ["--deployment", REAL_BOX, "--baseline-dir", str(BASELINES), "--class", "reasoning",
           "--context", "3500"]
PREDICTED = ("predicted 25.8–30.9 tok/s (avg commit 2.90 for reasoning, step time 103 ms at "
             "3500 tokens + 300 generated; run-to-run ±3.0% assumed: no history yet)")
FIT_NOTE = (" Note: step time from the padding fit: the baseline has no reasoning fit (step "
            "time depends on the context, not on the text).")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser(prog="specperf")
    cli.add_subcommand(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["explain", *argv])
    code = args.run(args)
    out, err = capsys.readouterr()
    return code, out, err


def _screen(*lines: str) -> str:
    """What explain prints: each line wrapped at the first screen's width."""
    return "\n".join(wrap(line) for line in lines) + "\n"


def test_incident_offline_is_what_the_deployment_does(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, *OFFLINE, "--observed-tok-s", "32")
    assert code == 0
    # The answer first, then the prediction it rests on, then how far the observation is.
    assert out == _screen(
        "specperf explain: noted — the observation is what this deployment does on this "
        "traffic — long context (step time 34 → 103 ms) and low-acceptance text (avg commit "
        "4.75 → 2.90) against the baseline's fastest case padding-ctx13 (139.6 tok/s), not a "
        f"regression.{FIT_NOTE}", f"  {PREDICTED}",
        "  observed 32.0 tok/s: 13.4% above the predicted 28.2 tok/s, 3.7% above the top of its "
        "range (30.9)")
    assert all(len(line) <= WIDTH for line in out.splitlines())


def test_prediction_is_the_judges_model() -> None:
    baseline, _ = prediction.load(BASELINES, REAL_BOX)
    pred = prediction.predict(baseline, "reasoning", 3500)
    fit = baseline.fits["padding"]
    assert pred.step_ms.value == pytest.approx(fit.predict_step_ms(3500 + 300))
    assert pred.avg_commit.value == pytest.approx(2.9)
    # tok/s = output / ((output − 1) / commit × step), times the baseline case's own rest
    rest = 29.0 / (600 / (599 / 2.9 * 0.100))
    assert pred.tok_s.value == pytest.approx(600 / (599 / 2.9 * pred.step_ms.value / 1000) * rest)


def test_slow_tok_s_alone_names_step_time(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, *OFFLINE, "--observed-tok-s", "22")
    assert code == 1
    assert out == _screen(
        "specperf explain: regression — observed tok/s is 22% below the prediction; with avg "
        "commit as predicted, step time is 28% above the fit at this context: a step-time "
        "regression: check the kernels, attention backend and KV cache (run the nightly job "
        f"against this deployment).{FIT_NOTE}", f"  {PREDICTED}",
        "  observed 22.0 tok/s: 22.0% below the predicted 28.2 tok/s, 14.7% below the bottom of "
        "its range (25.8)")


def test_low_commit_names_acceptance(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, *OFFLINE, "--observed-tok-s", "22", "--observed-commit", "2.0",
                       "--json")
    assert code == 1
    doc = json.loads(out)
    assert doc["factor"] == "acceptance"
    assert doc["factors"]["avg_commit"]["status"] == "regression"
    assert doc["factors"]["step_ms"]["status"] != "regression"
    assert "an acceptance regression: check the drafter and the text" in doc["message"]


def test_unknown_class_names_the_classes(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "--deployment", REAL_BOX, "--baseline-dir", str(BASELINES),
                         "--class", "code", "--context", "3500", "--observed-tok-s", "32")
    assert (code, out) == (2, "")
    assert err == (f"specperf explain: the baseline of '{REAL_BOX}' (v1) has no text class "
                   f"'code' (it has: padding, reasoning): pick one of those, or measure code "
                   f"with --specperf-text-classes code --specperf-update-baselines.\n")


def test_offline_needs_its_figures(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "--deployment", REAL_BOX, "--class", "reasoning")
    assert code == 2
    assert err == ("specperf explain: explain needs --endpoint (live) or --context, "
                   "--observed-tok-s (offline).\n")


def test_unreachable_endpoint_is_infrastructure(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "--deployment", REAL_BOX, "--baseline-dir", str(BASELINES),
                         "--endpoint", "http://127.0.0.1:9", "--window", "1")
    assert (code, out) == (3, "")
    assert err.startswith("specperf explain: ") and err.count("\n") == 1
    assert "127.0.0.1:9" in err


class _NoMetrics(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        return None


@pytest.fixture
def no_metrics() -> Iterator[str]:
    with serving(_NoMetrics) as url:
        yield url


def test_server_without_metrics(capsys: pytest.CaptureFixture[str], no_metrics: str) -> None:
    code, _, err = run(capsys, "--deployment", REAL_BOX, "--baseline-dir", str(BASELINES),
                       "--endpoint", no_metrics, "--window", "1")
    assert code == 3
    assert err == (f"specperf explain: {no_metrics} serves no /metrics (HTTP 404): explain "
                   f"reads the server's counters; start it with --enable-metrics (SGLang), or "
                   f"--metrics (llama-server), or point --endpoint at the server itself.\n")


def test_no_traffic_in_the_window(capsys: pytest.CaptureFixture[str],
                                  sim_server: SimProcess) -> None:
    code, _, err = run(capsys, "--deployment", "sim-kimi-k26-ddtree", "--baseline-dir",
                       str(BASELINES), "--endpoint", sim_server.url, "--window", "0.3")
    assert code == 3
    assert err == f"specperf explain: {NO_TRAFFIC}\n"
    assert NO_TRAFFIC == "nothing was generated in the window: explain needs live traffic"


def test_card_draws_the_observation(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    card = tmp_path / "card.html"
    code, out, _ = run(capsys, *OFFLINE, "--observed-tok-s", "32", "--html", str(card))
    assert code == 0
    assert out.splitlines()[-1] == f"specperf explain: card {card}"
    page = card.read_text(encoding="utf-8")
    assert "<svg" in page and 'data-status="noted"' in page
    assert "Observed 32.0 tok/s" in page and "run-to-run ±3.0% assumed" in page
    assert "baseline case reasoning-ctx3333" in page
    # The answer first, then the prediction it rests on, then the distance: the terminal's
    # order (issue 47), not the record's one sentence that opens with the observation.
    answer, basis, distance = (page.index('class="explanation"'), page.index('class="basis"'),
                               page.index('class="distance"'))
    assert answer < basis < distance
    assert page[basis:].split(">", 1)[1].startswith("Predicted ")


def test_faster_than_predicted_is_improved(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, *OFFLINE, "--observed-tok-s", "40", "--json")
    doc = json.loads(out)
    assert (code, doc["status"], doc["factor"]) == (0, "improved", "none")
    assert "the observation is 42% faster than the baseline predicts — the baseline may be " \
           "stale; refresh it with --specperf-update-baselines." in doc["message"]


def test_far_context_is_extrapolated(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--deployment", "sim-kimi-k26-ddtree", "--baseline-dir",
                       str(BASELINES), "--class", "reasoning", "--context", "20000",
                       "--observed-tok-s", "7", "--json")
    doc = json.loads(out)
    assert code in (0, 1)
    assert doc["prediction"]["notes"] == [
        "context 20000 is far outside the fitted range (mean contexts 313–5853): its step time "
        "is extrapolated; measure it with --specperf-contexts 20000 --specperf-update-baselines"]
    assert doc["message"].endswith(" Note: context 20000 is far outside the fitted range (mean "
                                   "contexts 313–5853): its step time is extrapolated; measure "
                                   "it with --specperf-contexts 20000 --specperf-update-baselines.")


def test_concurrency_without_its_baseline_is_said(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run(capsys, *OFFLINE, "--observed-tok-s", "20", "--concurrency", "4", "--json")
    assert json.loads(out)["prediction"]["notes"][-1] == (
        "concurrency 4.0: the deployment has no concurrency baseline, so step time is predicted "
        "as at concurrency 1; measure one with -m concurrency_scaling --specperf-update-baselines")


def test_live_class_is_the_nearest_by_avg_commit() -> None:
    baseline, _ = prediction.load(BASELINES, "sim-kimi-k26-ddtree")
    assert prediction.closest_class(baseline, 3500, 600, 2.95)[0] == "reasoning"
    assert prediction.closest_class(baseline, 3500, 600, 7.5) == (
        "padding", "class padding: its avg commit at this context (7.88) is the nearest to the "
                   "observed 7.50 (--class to choose)")


def test_history_gives_the_run_to_run_noise(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    history = tmp_path / "history.jsonl"
    runs = [{"label": "box", "kind": "full", "created": f"2026-11-2{i}T00:00:00Z",
             "cells": {"reasoning-ctx3333": {"tok_s": 29.0 * f, "step_ms": 100 / f},
                       "padding-ctx13": {"tok_s": 139.6 * f, "step_ms": 34 / f}}}
            for i, f in enumerate((1.0, 1.01, 0.99, 1.0))]
    history.write_text("".join(json.dumps(r) + "\n" for r in runs), encoding="utf-8")
    _, out, _ = run(capsys, *OFFLINE, "--observed-tok-s", "29", "--history", str(history),
                    "--label", "box", "--json")
    noise = json.loads(out)["prediction"]["noise"]
    assert noise.startswith("run-to-run ±") and noise.endswith("% from 4 nights")


def test_a_vllm_windows_context_counts_the_requests_that_started_in_it() -> None:
    """vLLM counts prompt tokens at prefill and requests at their end: 12 requests of 1500
    tokens started in the window, 11 finished, one more runs at its end than at its start."""
    from specperf.servers.livemetrics import VLLM, Scrape, _vllm

    def scrape(at: float, finished: float, running: float, prompts: float) -> Scrape:
        return Scrape(at, {VLLM["finished"]: finished, VLLM["running"]: running,
                           VLLM["iteration_prompt"]: prompts,
                           VLLM["iteration_generated"]: 300 * finished})

    seen = _vllm("http://box", scrape(0.0, 5, 1, 7 * 1500), scrape(3.0, 16, 2, 19 * 1500),
                 [1, 2, 2, 2], 1.0)
    assert seen.context == 1500
    assert seen.sources["context"] == ("Δvllm:prompt_tokens_total / (Δvllm:request_success_"
                                       "total, Δvllm:num_requests_running: the requests that "
                                       "started in the window)")


def _card_word(tmp_path: Path, capsys: pytest.CaptureFixture[str], tok_s: float) -> str:
    """The words beside the card's status for an observation of ``tok_s``."""
    card = tmp_path / f"card-{tok_s:.4f}.html"
    code, out, err = run(capsys, *OFFLINE, "--observed-tok-s", f"{tok_s:.4f}", "--json",
                         "--html", str(card))
    assert code == 0, err
    assert json.loads(out)["factor"] == "none"  # stdout stays one JSON document
    assert err == f"specperf explain: card {card}\n"
    page = card.read_text(encoding="utf-8")
    status = json.loads(out)["status"]
    return f"{status} — " + page.split('<span class="factor">')[1].split("</span>")[0]


def test_the_card_says_as_predicted_only_inside_the_predicted_range(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    baseline, _ = prediction.load(BASELINES, REAL_BOX)
    _, high = prediction.predict(baseline, "reasoning", 3500).tok_s.bounds()
    # the figure, 3.7 % above the top of the range, then just outside and just inside
    assert _card_word(tmp_path, capsys, high * 1.037) == "noted — above its predicted range"
    assert _card_word(tmp_path, capsys, high * 1.002).endswith(" — above its predicted range")
    assert _card_word(tmp_path, capsys, high * 0.998).endswith(" — as predicted")


def test_an_html_path_that_cannot_be_written_is_one_sentence(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    code, _, err = run(capsys, *OFFLINE, "--observed-tok-s", "32", "--html",
                       str(blocker / "card.html"))
    assert code == 2
    assert err == (f"specperf explain: --html {blocker / 'card.html'} cannot be written "
                   f"({blocker} is not a directory): give a path in a writable directory.\n")
