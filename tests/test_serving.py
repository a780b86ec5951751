"""The one lifecycle (`speechgate.serving`) through a real server on the fake engine, with keys
and a route to this server's own engines: every way in reaches the pools with the caller's
place, is admitted once, and a request refused while it is planned costs nothing of its key's
limits."""

from __future__ import annotations

import json
from collections.abc import Hashable, Iterator
from typing import Any

import httpx
import pytest
from websockets.sync.client import connect

from speechgate.metering.tenancy import Admission, Principal
from speechgate.service import SpeechPlan, SpeechStream
from tests.helpers.server import RunningServer, running_server
from tests.helpers.settings import fake_settings
from tests.helpers.tenancy import ADMIN_KEY, new_key
from tests.helpers.waiting import wait_for

ROUTES = """
providers:
  here: {kind: local, model: fake}
routes:
  routed: {providers: {here: 100}}
"""
TEXT = "Hello from the one lifecycle."
LOOPBACK = "127.0.0.1"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    folder = tmp_path_factory.mktemp("serving")
    (folder / "routes.yaml").write_text(ROUTES)
    settings = fake_settings(
        auth={"mode": "keys", "admin_key": ADMIN_KEY},
        store={"database_url": f"sqlite:///{folder / 'store.db'}"},
        routing={"routes_file": folder / "routes.yaml"},
    )
    with running_server(settings) as running:
        yield running


def post(server: RunningServer, secret: str, **body: Any) -> httpx.Response:
    return httpx.post(
        f"{server.url}/v1/audio/speech",
        json={"voice": "alloy", "input": TEXT, "response_format": "pcm", **body},
        headers={"Authorization": f"Bearer {secret}"},
        timeout=60,
    )


@pytest.mark.parametrize("model", ["fake", "routed"])
def test_a_request_reaches_the_pools_with_its_callers_place_admitted_once(
    server: RunningServer, monkeypatch: pytest.MonkeyPatch, model: str
) -> None:
    service, tenancy = server.runtime.service, server.state.tenancy
    opened: list[tuple[Hashable, Hashable]] = []
    admitted: list[int] = []
    open_plan, admit = service.open, tenancy.admit

    async def spy_open(
        plan: SpeechPlan, sender: Hashable | None = None, principal: Hashable = None
    ) -> SpeechStream:
        opened.append((sender, principal))
        return await open_plan(plan, sender, principal)

    async def spy_admit(principal: Principal, model: str, characters: int) -> Admission:
        admitted.append(characters)
        return await admit(principal, model, characters)

    monkeypatch.setattr(service, "open", spy_open)
    monkeypatch.setattr(tenancy, "admit", spy_admit)
    key_id, secret = new_key(server)
    answer = post(server, secret, model=model)
    assert answer.status_code == 200, answer.text
    assert answer.content
    # The key and address that a retry of a refused request names too, and the key whose
    # share of the workers it takes: routed through the local provider as much as not.
    assert opened == [((key_id, LOOPBACK), key_id)]
    assert admitted == [len(TEXT)]


def test_a_request_refused_while_it_is_planned_costs_nothing_of_its_keys_rate(
    server: RunningServer,
) -> None:
    _, secret = new_key(server, requests_per_second=0.001, burst=1)
    refused = post(server, secret, model="fake", voice="nobody-by-this-name")
    assert refused.status_code == 400, refused.text
    # The one request the key has in a very long while is still there.
    assert post(server, secret, model="fake").status_code == 200
    assert post(server, secret, model="fake").status_code == 429


def test_a_sessions_segments_take_its_keys_share_of_the_workers(
    server: RunningServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    pool = server.runtime.pools["fake"]
    senders: list[Hashable] = []
    synthesize = pool.synthesize

    def spy(*args: Any, **kwargs: Any) -> Any:
        senders.append(kwargs.get("sender", args[3] if len(args) > 3 else None))
        return synthesize(*args, **kwargs)

    monkeypatch.setattr(pool, "synthesize", spy)
    key_id, secret = new_key(server)
    with connect(
        server.url.replace("http", "ws") + "/v1/audio/speech/stream",
        additional_headers={"Authorization": f"Bearer {secret}"},
    ) as ws:
        update = {"model": "fake", "voice": "alloy", "response_format": "pcm"}
        ws.send(json.dumps({"type": "session.update", "session": update}))
        assert json.loads(ws.recv(timeout=30))["type"] == "session.created"
        ws.send(json.dumps({"type": "input_text.delta", "delta": "One. Two. "}))
        ws.send(json.dumps({"type": "input_text.done"}))
        while True:
            message = ws.recv(timeout=30)
            if isinstance(message, str) and json.loads(message)["type"] in (
                "session.done",
                "error",
            ):
                assert json.loads(message)["type"] == "session.done", message
                break
    wait_for(lambda: len(senders) >= 2)
    assert set(senders) == {key_id}
