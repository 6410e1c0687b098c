"""The alert rules and the Prometheus configuration, checked by promtool: syntax, and the unit tests in
deploy/prometheus/alerts.test.yml (one firing and one silent case per alert), which must fail when a rule breaks.

promtool comes from Debian's `prometheus` package; these tests fail, never skip, without it."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.deploy.references import DEPLOY, alert_rules, load_yaml

pytestmark = pytest.mark.slow  # runs promtool

PROMETHEUS = DEPLOY / "prometheus"


@pytest.fixture(scope="session")
def promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        pytest.fail(
            "promtool is not installed; the alert-rule tests need it. On Debian/Ubuntu, as root: "
            "`.ci/install-promtool` (or `apt-get install -y prometheus`, then stop the server it may start). "
            ".ci/run installs it when missing."
        )
    return path


def run(promtool: str, *args: str, cwd: Path = PROMETHEUS) -> subprocess.CompletedProcess:
    return subprocess.run([promtool, *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def test_rules_pass_promtool_check(promtool):
    result = run(promtool, "check", "rules", "alerts.yml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(alert_rules())} rules found" in result.stdout


def test_prometheus_config_passes_promtool_check(promtool, tmp_path):
    # The scrape token file exists only inside the container: point it at a stand-in for the full check.
    token = tmp_path / "metrics_token"
    token.write_text("stand-in")
    config = (PROMETHEUS / "prometheus.yml").read_text()
    assert "/run/secrets/metrics_token" in config
    (tmp_path / "prometheus.yml").write_text(config.replace("/run/secrets/metrics_token", str(token)))
    shutil.copy(PROMETHEUS / "alerts.yml", tmp_path / "alerts.yml")
    result = run(promtool, "check", "config", "prometheus.yml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 1 rule files found" in result.stdout


def test_alert_unit_tests_pass(promtool):
    result = run(promtool, "test", "rules", "alerts.test.yml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_every_alert_has_a_firing_and_a_silent_unit_test():
    cases = [case for test in load_yaml(PROMETHEUS / "alerts.test.yml")["tests"] for case in test["alert_rule_test"]]
    for rule in alert_rules():
        mine = [case for case in cases if case["alertname"] == rule["alert"]]
        assert any(case["exp_alerts"] for case in mine), f"{rule['alert']} has no firing case"
        assert any(not case["exp_alerts"] for case in mine), f"{rule['alert']} has no silent case"


@pytest.mark.parametrize(
    ("alert", "original", "broken"),
    [
        (
            "EigenfluxOutboxStale",
            "max(eigenflux_outbox_oldest_age_seconds) > 60",
            "max(eigenflux_outbox_oldest_age_seconds) > 600",
        ),
        (
            "EigenfluxNoLiveConsumer",
            "(eigenflux_pipeline_running_consumers) > 0",
            "(eigenflux_pipeline_running_consumers) > 5",
        ),
        ("EigenfluxModelErrorRate", 'outcome=~"unavailable|rejected|invalid_output"', 'outcome=~"rejected"'),
        (
            "EigenfluxBreakerStuckOpen",
            "eigenflux_pipeline_breaker_open_seconds >= eigenflux_pipeline_breaker_open_limit_seconds",
            "eigenflux_pipeline_breaker_open_seconds >= 2 * eigenflux_pipeline_breaker_open_limit_seconds",
        ),
    ],
)
def test_the_unit_tests_catch_a_broken_rule(promtool, tmp_path, alert, original, broken):
    rules = (PROMETHEUS / "alerts.yml").read_text()
    assert rules.count(original) == 1
    (tmp_path / "alerts.yml").write_text(rules.replace(original, broken))
    shutil.copy(PROMETHEUS / "alerts.test.yml", tmp_path / "alerts.test.yml")
    result = run(promtool, "test", "rules", "alerts.test.yml", cwd=tmp_path)
    assert result.returncode != 0
    assert f"alertname: {alert}" in result.stdout + result.stderr
