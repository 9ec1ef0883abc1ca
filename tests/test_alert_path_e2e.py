"""The alert path end to end on loopback (docs/dashboards.md, "The alert path on one
machine"): a regressed perf session pushes to a real Pushgateway, a real Prometheus scrapes
it and evaluates the shipped rules file, a real Alertmanager sends the regression alert to a
webhook in this process, and the alert names the deployment, the case and the factor."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import httpx
import pytest

from alert_stack import WebhookReceiver, alert_stack
from slowb_runs import BUSY_CLIENT_SPREAD
from specperf.record import schema as record_schema
from test_prometheus import samples
from test_verdicts_e2e import sim, written  # noqa: F401  (the simulator, its v1 baseline)

# Whole perf sessions against simulators: `pytest -m slow` (README: test commands).
pytestmark = pytest.mark.slow

# The shipped file, unchanged: SpecperfRegression has no `for:` (a pushed verdict is a
# settled fact that stays until the deployment's next push, not a signal that may flap), so
# the test needs no shorter copy of it.
RULES = Path(__file__).resolve().parents[1] / "examples" / "prometheus" / "specperf.rules.yml"
ALERT_DEADLINE_S = 45.0


def test_a_regressed_run_reaches_the_webhook_as_an_alert_naming_deployment_and_factor(
        sim, written, perf_project, tmp_path):  # noqa: F811  (fixtures)
    httpx.post(f"{sim.url}/_sim/reset").raise_for_status()
    httpx.post(f"{sim.url}/_sim/faults", json={"acceptance_mult": 0.6}).raise_for_status()
    base_dir = tmp_path / "baselines"
    shutil.copytree(written, base_dir)
    started = time.monotonic()
    with WebhookReceiver() as hook, alert_stack(tmp_path / "stack", RULES, hook.url) as stack:
        ready_s = time.monotonic() - started
        result = perf_project().run(
            "-m", "context_scaling", "--endpoint", sim.url, "--baseline-dir", str(base_dir),
            "--deployment", "test-dep", f"--specperf-pushgateway={stack.pushgateway}",
            BUSY_CLIENT_SPREAD, env={"SPECPERF_REPORT_DIR": str(tmp_path / "reports")})
        assert (f"specperf: pushed to {stack.pushgateway} (job specperf, deployment test-dep)"
                in result.stdout.lines), result.stdout.str()
        (run_dir,) = (tmp_path / "reports").glob("2*")
        doc = record_schema.load(run_dir / "results.json")
        regressed = {v["case_id"]: v["factor"] for v in doc["verdicts"] if v["status"] == "fail"}
        assert len(regressed) >= 3, result.stdout.str()  # ctx13's commits are capped: not all
        # The real Pushgateway holds the run's group, and says when it was pushed.
        held = samples(httpx.get(f"{stack.pushgateway}/metrics").text)
        assert {lab["case"] for lab, _ in held["specperf_verdict"]
                if lab["status"] == "regression" and lab["deployment"] == "test-dep"} \
            == set(regressed)
        (pushed,) = [v for lab, v in held["push_time_seconds"]
                     if (lab["job"], lab["deployment"]) == ("specperf", "test-dep")]

        def every_case_alerted(alerts: list[dict]) -> bool:
            return {a["labels"].get("case") for a in alerts
                    if a["labels"]["alertname"] == "SpecperfRegression"} >= set(regressed)

        arrived = hook.wait_for(every_case_alerted, ALERT_DEADLINE_S)
        assert arrived, f"no alert for every regressed case in {ALERT_DEADLINE_S:.0f} s; " \
                        f"the webhook received {json.dumps(hook.bodies, indent=1)}"
    print(f"\nthe three servers ready in {ready_s:.1f} s; from the push to the webhook's "
          f"first body {hook.received_at[0] - pushed:.1f} s; all of it (servers, session, "
          f"alert) {time.monotonic() - started:.1f} s. The webhook received:\n"
          + json.dumps(hook.bodies[0], indent=1, sort_keys=True))
    alerts = [a for a in hook.alerts() if a["labels"]["alertname"] == "SpecperfRegression"]
    for alert in alerts:
        labels, case = alert["labels"], alert["labels"]["case"]
        factor = regressed[case]
        assert factor, f"the verdict of {case} names no factor"
        assert alert["status"] == "firing"
        assert {k: labels[k] for k in ("deployment", "severity", "status", "job", "factor")} \
            == {"deployment": "test-dep", "severity": "page", "status": "regression",
                "job": "specperf", "factor": factor}
        assert alert["annotations"] == {
            "summary": f"specperf: test-dep regressed in {case}",
            "description": f"The last specperf run of test-dep judged {case} a regression of "
                           f"{factor}: open its report (results.json beside it) for the "
                           "attributed sentence."}
    assert not [a for a in hook.alerts() if a["labels"]["alertname"] != "SpecperfRegression"]
