"""The application factory: a start-up that fails part-way leaves nothing running."""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import ssl
from pathlib import Path

import pytest

from speechgate.api.app import create_app
from tests.helpers.settings import fake_settings, make_settings

pytestmark = pytest.mark.slow


def test_a_failed_start_stops_the_workers_it_started(tmp_path: Path) -> None:
    # The LLM relay is built after the engine workers; a CA file that is not PEM fails it.
    bad_ca = tmp_path / "ca.pem"
    bad_ca.write_text("not a certificate\n")
    settings = make_settings(
        engines=["espeak"],
        default_engine="espeak",
        pool={"workers": 1},
        llm={"base_url": "https://llm.invalid/v1", "ca_bundle": bad_ca},
    )
    app = create_app(settings)
    before = set(multiprocessing.active_children())

    async def start() -> None:
        async with app.router.lifespan_context(app):
            pytest.fail("started with a CA bundle that is not PEM")

    with pytest.raises(ssl.SSLError):
        asyncio.run(start())
    assert set(multiprocessing.active_children()) - before == set()


def test_a_started_server_says_what_it_serves(caplog: pytest.LogCaptureFixture) -> None:
    app = create_app(fake_settings(server={"port": 8123}))

    async def start() -> None:
        async with app.router.lifespan_context(app):
            pass

    with caplog.at_level(logging.INFO, logger="speechgate"):
        asyncio.run(start())
    [summary] = [r.getMessage() for r in caplog.records if r.name == "speechgate"]
    assert summary.startswith("speechgate ") and "serving on http://127.0.0.1:8123" in summary
    assert "fake (default): 3 voices" in summary
