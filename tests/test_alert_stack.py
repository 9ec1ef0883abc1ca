"""tests/alert_stack.py's own guarantees: a missing server binary fails the test (CI counts a
skip as a failure anyway), and a server that cannot start fails with its log, its
neighbours stopped."""

from __future__ import annotations

import pytest

import alert_stack


def test_a_missing_binary_fails_naming_the_packages(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(pytest.fail.Exception) as failed:
        alert_stack.binary("alertmanager")
    assert str(failed.value) == (
        "prometheus-alertmanager is not installed: apt-get install -y prometheus "
        "prometheus-pushgateway prometheus-alertmanager (.ci/run does)")


def test_a_server_that_cannot_start_fails_with_its_log_and_stops_the_others(tmp_path):
    started: list[alert_stack.Server] = []
    real_start = alert_stack._start

    def recording(*args: object) -> alert_stack.Server:
        server = real_start(*args)  # type: ignore[arg-type]
        started.append(server)
        return server

    rules = tmp_path / "broken.rules.yml"  # Prometheus refuses to start on a rule it cannot parse
    rules.write_text("groups: [{name: g, rules: [{alert: A, expr: 'up(('}]}]\n")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(alert_stack, "_start", recording)
        with pytest.raises(pytest.fail.Exception) as failed:
            with alert_stack.alert_stack(tmp_path / "stack", rules, "http://127.0.0.1:9/"):
                pass
    assert str(failed.value).startswith("prometheus exited (")
    assert "broken.rules.yml" in str(failed.value)
    assert [s.name for s in started] == ["pushgateway", "alertmanager", "prometheus"]
    assert all(s.process.poll() is not None for s in started)
