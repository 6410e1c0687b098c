"""Deployment settings: HTTPS switches make `check --deploy` clean, /metrics can require a bearer token,
the pipeline's metrics port binds to loopback unless configured, and the data directory is private."""

from __future__ import annotations

import os
import secrets
import socket
import stat
import subprocess
import sys

import pytest
from django.test import Client

from eigenflux.base.embedded import postgres_runs_as_other_user, private_dir
from pipeline import metrics as pipeline_metrics
from tests.pipeline.runtime.fixtures import REPO, pipeline_env, run_pipeline, wait_for  # noqa: F401


def check_deploy(settings, **env: str) -> subprocess.CompletedProcess:
    """`manage.py check --deploy` in a fresh process, since these settings are read when Django starts."""
    environment = {
        **{k: v for k, v in os.environ.items() if k not in ("DEBUG", "HTTPS") and not k.startswith("SECURE_")},
        "DATABASE_URL": settings.DATABASE_URL,
        "REDIS_URL": settings.REDIS_URL,
        "SECRET_KEY": secrets.token_urlsafe(50),
        "METRICS_TOKEN": secrets.token_urlsafe(24),
        **env,
    }
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=REPO,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.slow
def test_check_deploy_is_clean_with_the_https_switches(settings):
    result = check_deploy(settings, HTTPS="true", SECURE_HSTS_PRELOAD="true")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout


@pytest.mark.slow
def test_https_alone_leaves_only_the_deliberate_preload_choice(settings):
    result = check_deploy(settings, HTTPS="true")
    assert result.returncode == 1
    found = set(__import__("re").findall(r"\(security\.W\d+\)", result.stderr))
    assert found == {"(security.W021)"}, result.stderr


@pytest.mark.slow
def test_without_the_switches_check_deploy_warns(settings):
    result = check_deploy(settings)
    for warning in ("W004", "W008", "W012", "W016"):
        assert f"security.{warning}" in result.stderr


@pytest.mark.django_db
def test_redirect_to_https_honours_the_proxy_header_and_spares_the_probes(settings):
    settings.SECURE_SSL_REDIRECT = True
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    settings.METRICS_TOKEN = "scrape-secret"
    assert Client().get("/api/v1/openapi.json").status_code == 301
    assert Client(HTTP_X_FORWARDED_PROTO="https").get("/api/v1/openapi.json").status_code == 200
    assert Client().get("/healthz").status_code == 200
    assert Client(HTTP_AUTHORIZATION="Bearer scrape-secret").get("/metrics").status_code == 200


def test_the_proxy_header_setting_is_parsed_and_checked(monkeypatch):
    from django.core.exceptions import ImproperlyConfigured

    from eigenflux.base.environ import env_header_value

    monkeypatch.setenv("SECURE_PROXY_SSL_HEADER", "X-Forwarded-Proto: https")
    assert env_header_value("SECURE_PROXY_SSL_HEADER") == ("HTTP_X_FORWARDED_PROTO", "https")
    monkeypatch.setenv("SECURE_PROXY_SSL_HEADER", "https")
    with pytest.raises(ImproperlyConfigured, match="SECURE_PROXY_SSL_HEADER"):
        env_header_value("SECURE_PROXY_SSL_HEADER")


# --- metrics -------------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_metrics_need_the_bearer_token_when_one_is_configured(settings):
    settings.METRICS_TOKEN = "scrape-secret"
    missing = Client().get("/metrics")
    assert missing.status_code == 401
    assert missing["WWW-Authenticate"].startswith("Bearer")
    assert Client(HTTP_AUTHORIZATION="Bearer wrong").get("/metrics").status_code == 401
    allowed = Client(HTTP_AUTHORIZATION="Bearer scrape-secret").get("/metrics")
    assert allowed.status_code == 200
    assert b"django_http_requests" in allowed.content


@pytest.mark.django_db
def test_without_a_token_metrics_are_refused_unless_debug_is_on(settings):
    settings.METRICS_TOKEN = ""
    refused = Client().get("/metrics")
    assert refused.status_code == 403 and "METRICS_TOKEN" in refused.json()["error"]["message"]
    assert b"django_http_requests" not in refused.content
    settings.DEBUG = True  # a developer's own machine
    assert Client().get("/metrics").status_code == 200


def test_check_deploy_warns_when_metrics_has_no_token(settings):
    from eigenflux.base.checks import check_metrics_token

    settings.METRICS_TOKEN = ""
    assert [w.id for w in check_metrics_token()] == ["eigenflux.W002"]
    settings.METRICS_TOKEN = "scrape-secret"
    assert check_metrics_token() == []


@pytest.mark.parametrize(
    ("proxies", "warned"),
    [
        ([], False),
        (["10.0.0.0/8", "172.16.0.0/12", "fd00::/8"], False),  # private networks: your own proxies
        (["203.0.113.7", "198.51.100.0/24"], False),  # a public proxy, or a small subnet of them
        (["0.0.0.0/0"], True),  # everyone could forge X-Forwarded-For
        (["::/0"], True),
        (["10.0.0.1", "8.0.0.0/8"], True),
    ],
)
def test_check_warns_when_trusted_proxies_trust_wide_public_networks(settings, proxies, warned):
    from eigenflux.base.checks import check_trusted_proxies

    settings.TRUSTED_PROXIES = proxies
    assert [w.id for w in check_trusted_proxies()] == (["eigenflux.W003"] if warned else [])


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_pipeline_metrics_bind_to_loopback_by_default(settings):
    assert settings.PIPELINE_METRICS_HOST == "127.0.0.1"
    address = pipeline_metrics.serve(free_port(), settings.PIPELINE_METRICS_HOST)
    assert address is not None and address[0] == "127.0.0.1"
    with socket.create_connection(address, timeout=5) as conn:
        conn.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
        assert b"eigenflux_pipeline_messages_total" in conn.makefile("rb").read()


def listening_address(port: int) -> str | None:
    """The IPv4 address a local socket listens on for `port` (from /proc/net/tcp), or None."""
    for line in open("/proc/net/tcp").read().splitlines()[1:]:  # noqa: SIM115 - a tiny proc file
        local, state = line.split()[1], line.split()[3]
        address, port_hex = local.split(":")
        if state == "0A" and int(port_hex, 16) == port:  # 0A: LISTEN
            return socket.inet_ntoa(bytes.fromhex(address)[::-1])
    return None


@pytest.mark.slow
@pytest.mark.parametrize(("env", "expected"), [({}, "127.0.0.1"), ({"PIPELINE_METRICS_HOST": "0.0.0.0"}, "0.0.0.0")])  # noqa: S104
def test_run_pipeline_metrics_listen_on_loopback_unless_configured(run_pipeline, env, expected):  # noqa: F811
    port = free_port()
    process = run_pipeline("--relay-only", "--no-housekeeping", env={"PIPELINE_METRICS_PORT": str(port), **env})
    assert wait_for(lambda: listening_address(port), 60, 0.1, "the metrics port") == expected
    process.terminate()
    assert process.wait(30) == 0


# --- the data directory ---------------------------------------------------------------------------------


def test_the_data_directory_is_created_private(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)  # an ordinary user (the tests may run as root)
    created = private_dir(tmp_path / "fresh" / ".data")
    assert stat.S_IMODE(created.stat().st_mode) == 0o700


def test_an_existing_data_directory_is_tightened(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    existing = tmp_path / ".data"
    existing.mkdir()
    os.chmod(existing, 0o755)  # noqa: S103 - the loose mode an older checkout left behind
    private_dir(existing)
    assert stat.S_IMODE(existing.stat().st_mode) == 0o700


def test_the_running_projects_data_directory_is_private(settings):
    mode = stat.S_IMODE(settings.DATA_DIR.stat().st_mode)
    assert mode & 0o077 in (0, 0o011)  # nobody else may list or write it
    if not postgres_runs_as_other_user():
        assert mode == 0o700


def test_as_root_the_embedded_postgres_user_may_only_pass_through(tmp_path, monkeypatch):
    """pgserver, started by root, runs PostgreSQL as its own user, which must reach .data/pg."""
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    assert stat.S_IMODE(private_dir(tmp_path / "a").stat().st_mode) == 0o711
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert stat.S_IMODE(private_dir(tmp_path / "a").stat().st_mode) == 0o700
