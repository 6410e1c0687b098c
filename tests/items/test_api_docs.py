"""/api/v1/docs works without internet: the page references no other host and Swagger UI's files are served
by this server (after `collectstatic`, as `make run` does)."""

from __future__ import annotations

import json
import re

import pytest
from django.core.management import call_command
from django.test import Client

ATTRIBUTE_URL = re.compile(r"""(?:src|href)\s*=\s*["']([^"']+)["']""", re.IGNORECASE)


@pytest.fixture
def collected(settings, tmp_path):
    """Static files collected into a fresh STATIC_ROOT; a new Client's whitenoise serves them."""
    settings.STATIC_ROOT = tmp_path / "static"
    call_command("collectstatic", interactive=False, verbosity=0)
    return Client()


def test_the_docs_page_references_no_external_host_and_its_assets_are_served(collected):
    page = collected.get("/api/v1/docs")
    assert page.status_code == 200
    html = page.content.decode()
    urls = ATTRIBUTE_URL.findall(html)
    assert urls, "the page should load Swagger UI's script and stylesheet"
    for url in urls:
        assert url.startswith("/") and not url.startswith("//"), f"{url} is not served by this server"
    assert "http://" not in html and "https://" not in html

    settings_json = json.loads(re.search(r'id="swagger-settings">(.*?)</script>', html, re.DOTALL).group(1))
    assert settings_json["url"] == "/api/v1/openapi.json"
    assert settings_json["validatorUrl"] is None  # no request to the online validator

    scripts = [url for url in urls if url.endswith(".js")]
    assert any("swagger-ui-bundle" in url for url in scripts)
    for url in urls:
        asset = collected.get(url)
        assert asset.status_code == 200, url
        body = b"".join(asset.streaming_content) if asset.streaming else asset.content
        assert len(body) > 100, url
        if "swagger-ui-bundle" in url:
            assert b"SwaggerUIBundle" in body
    assert collected.get("/api/v1/openapi.json").status_code == 200
