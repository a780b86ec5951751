"""The playground's files are served by the app itself, with no build step."""

from __future__ import annotations

from tests.helpers.inprocess import InProcessApp, in_process
from tests.helpers.settings import fake_settings


def test_the_page_and_its_assets_are_served(fake_app: InProcessApp) -> None:
    page = fake_app.http.get("/")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert '<script type="module" src="/web/playground.js">' in page.text
    for asset, content_type in [
        ("playground.js", "text/javascript"),
        ("style.css", "text/css"),
    ]:
        response = fake_app.http.get(f"/web/{asset}")
        assert response.status_code == 200
        assert response.headers["content-type"].startswith(content_type)


def test_a_missing_asset_is_404(fake_app: InProcessApp) -> None:
    assert fake_app.http.get("/web/nothing.js").status_code == 404


def test_the_page_is_not_in_the_api_document(fake_app: InProcessApp) -> None:
    paths = fake_app.http.get("/openapi.json").json()["paths"]
    assert "/" not in paths
    assert "/v1/status" in paths


def test_the_page_can_be_turned_off() -> None:
    with in_process(fake_settings(server={"playground": False})) as server:
        assert server.http.get("/").status_code == 404
        assert server.http.get("/web/playground.js").status_code == 404
        assert server.http.get("/v1/status").status_code == 200
