"""ElevenLabs' pronunciation dictionaries through the app with keys: made from rules,
owned by their key, invalid rules refused with nothing stored."""

# ruff: noqa: RUF001 - IPA in strings
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from speechgate.metering.store import Store
from tests.helpers.inprocess import InProcessApp, in_process
from tests.helpers.settings import fake_settings
from tests.helpers.tenancy import ADMIN_KEY, admin, new_key, tenancy

ADD = "/v1/pronunciation-dictionaries/add-from-rules"
RULES = [
    {"type": "alias", "string_to_replace": "nginx", "alias": "engine x"},
    {"type": "phoneme", "string_to_replace": "tomato", "phoneme": "təˈmɑːtoʊ", "alphabet": "ipa"},
]


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessApp]:
    url = f"sqlite:///{tmp_path_factory.mktemp('store') / 'store.db'}"
    settings = fake_settings(
        auth={"mode": "keys", "admin_key": ADMIN_KEY}, store={"database_url": url}
    )
    with in_process(settings) as server:
        yield server


def client(server: InProcessApp, secret: str) -> httpx2.Client:
    return server.client(headers={"xi-api-key": secret})


def stored(server: InProcessApp, key_id: str) -> int:
    store: Store = tenancy(server).store
    return len(store.list_dictionaries(key_id))


def test_a_dictionary_is_made_from_rules_and_only_its_key_sees_it(keyed: InProcessApp) -> None:
    mine, secret = new_key(keyed)
    _, other = new_key(keyed)
    with client(keyed, secret) as elevenlabs:
        made = elevenlabs.post(ADD, json={"name": "ops", "rules": RULES})
        assert made.status_code == 200, made.text
        body = made.json()
        assert body["name"] == "ops" and body["version_rules_num"] == 2
        assert body["id"] and body["version_id"] and body["created_by"] == mine
        got = elevenlabs.get(f"/v1/pronunciation-dictionaries/{body['id']}")
        assert got.status_code == 200 and got.json()["latest_version_id"] == body["version_id"]
    with client(keyed, other) as elevenlabs:
        hidden = elevenlabs.get(f"/v1/pronunciation-dictionaries/{body['id']}")
    assert hidden.status_code == 404
    assert hidden.json()["detail"]["status"] == "pronunciation_dictionary_not_found"
    assert keyed.http.get(f"/v1/pronunciation-dictionaries/{body['id']}").status_code == 401


@pytest.mark.parametrize(
    ("rules", "named"),
    [
        (
            [RULES[0], {"type": "phoneme", "string_to_replace": "tomato", "phoneme": "tə'mɑːto"}],
            "rule 1 ('tomato'): invalid IPA",
        ),
        (
            [
                {"type": "alias", "string_to_replace": "A", "alias": "B"},
                {"type": "alias", "string_to_replace": "B", "alias": "A"},
            ],
            "the aliases loop",
        ),
        ([{"type": "alias", "string_to_replace": "", "alias": "x"}], "string_to_replace"),
    ],
)
def test_invalid_rules_are_refused_and_nothing_is_stored(
    keyed: InProcessApp, rules: list[object], named: str
) -> None:
    key_id, secret = new_key(keyed)
    with client(keyed, secret) as elevenlabs:
        refused = elevenlabs.post(ADD, json={"name": "bad", "rules": rules})
    assert refused.status_code == 422
    detail = refused.json()["detail"]
    assert detail["status"] == "invalid_rules" and named in detail["message"]
    assert stored(keyed, key_id) == 0


def test_a_ten_megabyte_dictionary_is_refused(keyed: InProcessApp, tmp_path: Path) -> None:
    key_id, secret = new_key(keyed)
    rules = [
        {"type": "alias", "string_to_replace": f"w{i}", "alias": "x" * 200} for i in range(50_000)
    ]
    with client(keyed, secret) as elevenlabs:
        refused = elevenlabs.post(ADD, json={"name": "huge", "rules": rules})
    assert refused.status_code == 413
    assert stored(keyed, key_id) == 0


def test_the_admin_api_lists_creates_shows_and_deletes_a_keys_dictionaries(
    keyed: InProcessApp,
) -> None:
    key_id, secret = new_key(keyed)
    path = f"/admin/keys/{key_id}/pronunciation-dictionaries"
    with admin(keyed) as api:
        made = api.post(path, json={"name": "ops", "rules": RULES})
        assert made.status_code == 201, made.text
        body = made.json()
        assert body["key_id"] == key_id and body["rule_count"] == 2
        assert body["rules"][0]["alias"] == "engine x"
        listed = api.get(path).json()["data"]
        assert [item["id"] for item in listed] == [body["id"]]
        assert api.get(f"{path}/{body['id']}").json()["rules"] == body["rules"]
        refused = api.post(path, json={"name": "bad", "rules": [{"type": "alias"}]})
        assert refused.status_code == 400
        assert refused.json()["error"]["code"] == "invalid_rules"
        assert api.get("/admin/keys/key_none/pronunciation-dictionaries").status_code == 404
    # The key uses it by its id; deleted, it is refused at once.
    locator = {"pronunciation_dictionary_id": body["id"]}
    with client(keyed, secret) as elevenlabs:
        assert elevenlabs.get(f"/v1/pronunciation-dictionaries/{body['id']}").status_code == 200
        speak = {
            "text": "nginx",
            "model_id": "fake",
            "pronunciation_dictionary_locators": [locator],
        }
        assert elevenlabs.post("/v1/text-to-speech/alloy", json=speak).status_code == 200
        with admin(keyed) as api:
            assert api.delete(f"{path}/{body['id']}").json() == {"id": body["id"], "deleted": True}
            assert api.get(f"{path}/{body['id']}").status_code == 404
        assert elevenlabs.post("/v1/text-to-speech/alloy", json=speak).status_code == 404
    # Only the admin key.
    with keyed.client(headers={"Authorization": f"Bearer {secret}"}) as user:
        assert user.get(f"/v1{path}").status_code == 403


def test_a_key_lists_and_deletes_its_own_dictionaries(keyed: InProcessApp) -> None:
    _, secret = new_key(keyed)
    _, other = new_key(keyed)
    with client(keyed, secret) as elevenlabs:
        made = elevenlabs.post(ADD, json={"name": "mine", "rules": RULES[:1]}).json()
        listed = elevenlabs.get("/v1/pronunciation-dictionaries").json()
        assert [d["id"] for d in listed["pronunciation_dictionaries"]] == [made["id"]]
        assert listed["has_more"] is False
    with client(keyed, other) as elevenlabs:
        assert (
            elevenlabs.get("/v1/pronunciation-dictionaries").json()["pronunciation_dictionaries"]
            == []
        )
        hidden = elevenlabs.delete(f"/v1/pronunciation-dictionaries/{made['id']}")
        assert hidden.status_code == 404
    with client(keyed, secret) as elevenlabs:
        deleted = elevenlabs.delete(f"/v1/pronunciation-dictionaries/{made['id']}")
        assert deleted.json() == {"id": made["id"], "deleted": True}
        assert elevenlabs.get(f"/v1/pronunciation-dictionaries/{made['id']}").status_code == 404
