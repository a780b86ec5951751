"""The playground's files are served by the app itself, with no build step."""

from __future__ import annotations

import httpx
import pytest

from tests.helpers.server import RunningServer, running_server
from tests.helpers.settings import make_settings

pytestmark = pytest.mark.slow


def test_the_page_and_its_assets_are_served(server: RunningServer) -> None:
    page = httpx.get(f"{server.url}/", timeout=10)
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert '<script type="module" src="/web/playground.js">' in page.text
    for asset, content_type in [
        ("playground.js", "text/javascript"),
        ("style.css", "text/css"),
    ]:
        response = httpx.get(f"{server.url}/web/{asset}", timeout=10)
        assert response.status_code == 200
        assert response.headers["content-type"].startswith(content_type)


def test_a_missing_asset_is_404(server: RunningServer) -> None:
    assert httpx.get(f"{server.url}/web/nothing.js", timeout=10).status_code == 404


def test_the_page_is_not_in_the_api_document(server: RunningServer) -> None:
    paths = httpx.get(f"{server.url}/openapi.json", timeout=10).json()["paths"]
    assert "/" not in paths
    assert "/v1/status" in paths


def test_the_page_can_be_turned_off() -> None:
    with running_server(
        make_settings(
            engines=["espeak"],
            default_engine="espeak",
            pool={"workers": 1},
            server={"playground": False},
        )
    ) as server:
        assert httpx.get(f"{server.url}/", timeout=10).status_code == 404
        assert httpx.get(f"{server.url}/web/playground.js", timeout=10).status_code == 404
        assert httpx.get(f"{server.url}/v1/status", timeout=10).status_code == 200
