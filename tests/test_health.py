import pytest


@pytest.mark.django_db
def test_healthz_and_readyz(client):
    assert client.get("/healthz").json() == {"status": "ok"}
    ready = client.get("/readyz")
    assert ready.status_code == 200
    assert ready.json()["checks"] == {"postgresql": "ok", "redis": "ok"}


@pytest.mark.django_db
def test_readyz_names_the_missing_dependency(client, settings, tmp_path):
    settings.REDIS_URL = f"unix://{tmp_path}/nothing-here.sock"
    ready = client.get("/readyz")
    assert ready.status_code == 503
    assert ready.json()["checks"]["postgresql"] == "ok"
    assert ready.json()["checks"]["redis"].startswith("unavailable")


@pytest.mark.django_db
def test_metrics_endpoint(client, settings):
    settings.METRICS_TOKEN = "scrape-secret"
    response = client.get("/metrics", HTTP_AUTHORIZATION="Bearer scrape-secret")
    assert response.status_code == 200
    assert b"django_http_requests" in response.content


@pytest.mark.django_db
def test_readyz_exports_each_check_for_the_alert(client, settings, tmp_path):
    from prometheus_client import REGISTRY

    def gauge(check: str) -> float | None:
        return REGISTRY.get_sample_value("eigenflux_readiness_check_ok", {"check": check})

    client.get("/readyz")
    assert (gauge("postgresql"), gauge("redis")) == (1.0, 1.0)
    settings.REDIS_URL = f"unix://{tmp_path}/nothing-here.sock"
    client.get("/readyz")
    assert (gauge("postgresql"), gauge("redis")) == (1.0, 0.0)
