"""Two gateways sharing one key's limits: one real PostgreSQL store, one real Redis, two real
servers on loopback, driven by the openai SDK."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import openai
import pytest

from speechgate.settings import Settings
from tests.helpers.postgres import fresh_database
from tests.helpers.server import RunningServer, refusing_port, running_server, sdk_client
from tests.helpers.settings import fake_settings
from tests.helpers.tenancy import (
    ADMIN_KEY,
    SHORT,
    attempt,
    held,
    new_key,
    speak,
    tenancy,
    usage,
)
from tests.helpers.waiting import wait_for

pytestmark = pytest.mark.slow


def gateway_settings(database_url: str, limits_url: str) -> Settings:
    return fake_settings(
        auth={"mode": "keys", "admin_key": ADMIN_KEY},
        store={"database_url": database_url, "limits_url": limits_url},
    )


@pytest.fixture(scope="module")
def gateways(postgres_server: str, redis_server: str) -> Iterator[list[RunningServer]]:
    settings = gateway_settings(fresh_database(postgres_server), redis_server)
    with running_server(settings) as first, running_server(settings) as second:
        yield [first, second]


def test_two_gateways_enforce_one_keys_rate_limit_together(
    gateways: list[RunningServer],
) -> None:
    # Three at once, then one every 1000 seconds: nothing refills while the test runs.
    _, secret = new_key(gateways[0], requests_per_second=0.001, burst=3)
    outcomes = [attempt(gateways[n % 2], secret) for n in range(8)]
    admitted = [outcome for outcome in outcomes if isinstance(outcome, dict)]
    refused = [outcome for outcome in outcomes if not isinstance(outcome, dict)]
    assert len(admitted) == 3 and len(refused) == 5
    # Counted in one bucket: the second gateway saw the first one's request.
    assert [h["x-ratelimit-remaining-requests"] for h in admitted] == ["2", "1", "0"]
    for error in refused:
        assert error.status_code == 429
        assert error.response.json()["error"] == {
            "message": "Rate limit reached: 0.001 requests per second (burst 3) for this key.",
            "type": "rate_limit_error",
            "param": None,
            "code": "rate_limit_exceeded",
        }
        assert 900 < int(error.response.headers["retry-after"]) <= 1000
        assert error.response.headers["x-ratelimit-remaining-requests"] == "0"


def test_the_concurrency_cap_holds_across_gateways(gateways: list[RunningServer]) -> None:
    first, second = gateways
    key_id, secret = new_key(first, max_concurrent=1)
    with sdk_client(first, secret) as one, sdk_client(second, secret) as other:
        with held(one):
            with pytest.raises(openai.RateLimitError) as raised:
                speak(other)
            assert raised.value.code == "concurrency_limit_exceeded"
            assert raised.value.response.headers["retry-after"] == "1"
        # The first gateway frees the slot in Redis once its request is over.
        wait_for(lambda: tenancy(first).in_flight(key_id) == 0)
        # One request after another, each sent as the last answer arrives, from gateway to
        # gateway: a slot is free everywhere before its answer ends, so none is refused.
        for client in (other, one, other, one):
            speak(client)


def test_the_monthly_quota_holds_across_gateways(gateways: list[RunningServer]) -> None:
    first, second = gateways
    _, secret = new_key(first, monthly_characters=2 * len(SHORT) + 1)
    remaining = []
    for server in (first, second):
        outcome = attempt(server, secret)
        assert isinstance(outcome, dict), outcome
        remaining.append(outcome["x-ratelimit-remaining-characters"])
    assert remaining == [str(len(SHORT) + 1), "1"]
    with sdk_client(first, secret) as client:
        with pytest.raises(openai.RateLimitError) as raised:
            speak(client)
        assert raised.value.code == raised.value.type == "insufficient_quota"
        assert raised.value.response.headers["x-ratelimit-remaining-characters"] == "1"
    with sdk_client(second, secret) as client:
        speak(client, text="A")  # what is left still works, on either gateway


def test_both_gateways_usage_is_in_one_report(gateways: list[RunningServer]) -> None:
    first, second = gateways
    key_id, secret = new_key(second, max_concurrent=2)
    texts = [(first, ["One.", "Two."]), (second, ["Three.", "Four.", "Five."])]
    for server, said in texts:
        with sdk_client(server, secret) as client:
            for text in said:
                speak(client, text)
    characters = sum(len(text) for _, said in texts for text in said)
    # Each gateway writes its records every usage_flush_interval; either one reports them all.
    for server in gateways:
        wait_for(lambda server=server: usage(server, secret)["total"]["requests"] == 5)
        assert usage(server, secret)["total"]["characters"] == characters
        by_key = usage(server, ADMIN_KEY, group_by="key")
        assert sum(line["requests"] for line in by_key["lines"] if line["key_id"] == key_id) == 5


@pytest.mark.parametrize("there", ["nothing", "an HTTP server"])
def test_unreachable_redis_is_a_503_naming_it(
    there: str, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> None:
    store = f"sqlite:///{tmp_path_factory.mktemp('store') / 'store.db'}"
    with contextlib.ExitStack() as stack:
        if there == "nothing":
            port = stack.enter_context(refusing_port())
        else:  # limits_url names something else: it answers, but not as Redis does
            port = int(request.getfixturevalue("fake_server").url.rsplit(":", 1)[1])
        server = stack.enter_context(
            running_server(gateway_settings(store, f"redis://127.0.0.1:{port}/0"))
        )
        _, limited = new_key(server, requests_per_second=10)
        with (
            sdk_client(server, limited) as client,
            pytest.raises(openai.InternalServerError) as raised,
        ):
            speak(client)
        assert raised.value.status_code == 503
        assert raised.value.code == "limits_unavailable"
        assert "Redis" in raised.value.message
        assert raised.value.response.headers["retry-after"] == "1"
        # A key without limits has nothing to check there.
        _, unlimited = new_key(server)
        with sdk_client(server, unlimited) as client:
            speak(client)
