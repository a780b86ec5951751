"""`speechgate keys ...`, `speechgate usage` and `speechgate lexicons ...` on both stores."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest
from sqlalchemy import make_url, select, text
from typer.testing import CliRunner

from speechgate.cli import app
from speechgate.metering.key_secrets import hash_key
from speechgate.metering.records import UsageRecord
from speechgate.metering.schema import api_keys
from speechgate.metering.store import Store
from tests.helpers.postgres import fresh_database

pytestmark = pytest.mark.slow


def run(store_url: str, *args: str, ok: bool = True) -> str:
    """The command's output, run in this process (typer's runner): the entry point that users
    run is the same typer app, proven as a process of its own in tests/test_cli.py."""
    env = {"SPEECHGATE_STORE__DATABASE_URL": store_url, "COLUMNS": "200"}
    ran = CliRunner().invoke(app, list(args), env=env)
    assert (ran.exit_code == 0) == ok, ran.output
    return ran.output


def test_keys_create_list_update_revoke(store_url: str) -> None:
    created = run(
        store_url,
        "keys",
        "create",
        "team-a",
        "--models",
        "tts-1,espeak",
        "--rps",
        "2",
        "--burst",
        "4",
        "--monthly-chars",
        "5000",
    )
    secret = created.strip().splitlines()[-1]
    assert secret.startswith("sk-sg-")
    store = Store(store_url)
    stored = store.find_key(hash_key(secret))
    assert stored is not None
    key = stored.key
    assert key.limits.models == ("tts-1", "espeak") and key.limits.burst == 4
    with store.engine.connect() as connection:
        assert connection.execute(select(api_keys.c.key_hash)).scalar_one() == hash_key(secret)

    listed = run(store_url, "keys", "list")
    assert key.id in listed and "team-a" in listed and key.hint in listed
    assert secret not in listed

    run(store_url, "keys", "update", key.id, "--max-concurrent", "2", "--unset", "models")
    updated = store.get_key(key.id)
    assert updated is not None
    assert (updated.limits.max_concurrent, updated.limits.models) == (2, None)
    assert updated.limits.monthly_characters == 5000
    assert "burst needs" in run(store_url, "keys", "update", key.id, "--unset", "rps", ok=False)

    run(store_url, "keys", "revoke", key.id)
    revoked = store.get_key(key.id)
    assert revoked is not None and revoked.revoked_at is not None
    assert "key_nope" in run(store_url, "keys", "revoke", "key_nope", ok=False)
    store.close()


def test_usage_prints_a_priced_table(store_url: str) -> None:
    store = Store(store_url)
    store.migrate()
    store.insert_usage(
        [
            UsageRecord(
                datetime(2026, 1, 15),
                f"r{i}",
                "key_a",
                "tts-1",
                "local",
                "piper",
                "alloy",
                200_000,
                10.0,
                0.1,
                1.0,
                200,
            )
            for i in range(5)
        ]
    )
    store.close()
    table = run(store_url, "usage", "--period", "2026-01")
    assert "tts-1" in table and "1000000" in table
    # A million characters at OpenAI tts-1's $15 per million.
    assert "15.0000" in table
    assert "1000000" not in run(store_url, "usage", "--period", "2026-02")
    assert "period" in run(store_url, "usage", "--period", "someday", ok=False)


@pytest.mark.parametrize("args", [["keys", "list"], ["keys", "create", "ci"], ["usage"]])
def test_a_command_closes_its_postgresql_connections(
    postgres_server: str, monkeypatch: pytest.MonkeyPatch, args: list[str]
) -> None:
    url = fresh_database(postgres_server)
    monkeypatch.setenv("SPEECHGATE_STORE__DATABASE_URL", url)
    # In this process, so that a connection left in the command's pool stays open to be seen.
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    observer = Store(postgres_server)
    try:
        with observer.engine.connect() as connection:
            open_there = connection.execute(
                text("SELECT count(*) FROM pg_stat_activity WHERE datname = :name"),
                {"name": make_url(url).database},
            ).scalar_one()
    finally:
        observer.close()
    assert open_there == 0


def test_lexicons_add_list_show_delete(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    key_id = run(url, "keys", "create", "lexicon-owner").split("key_")[1].split()[0]
    key_id = f"key_{key_id}"
    rules = tmp_path / "names.yaml"
    rules.write_text("- {type: alias, string_to_replace: nginx, alias: engine x}\n")
    added = run(url, "lexicons", "add", "--key", key_id, "--file", str(rules))
    dictionary_id = "pd_" + added.split("pd_")[1].split()[0]
    assert "names" in added
    assert dictionary_id in run(url, "lexicons", "list", "--key", key_id)
    assert dictionary_id not in run(url, "lexicons", "list")  # no key's
    shown = json.loads(run(url, "lexicons", "show", dictionary_id, "--key", key_id))
    assert shown[0]["alias"] == "engine x"
    # Another key's, or none's, is not there to show or delete.
    assert "has no pronunciation dictionary" in run(
        url, "lexicons", "show", dictionary_id, ok=False
    )
    run(url, "lexicons", "delete", dictionary_id, ok=False)
    run(url, "lexicons", "delete", dictionary_id, "--key", key_id)
    assert dictionary_id not in run(url, "lexicons", "list", "--key", key_id)
    looping = tmp_path / "loop.json"
    looping.write_text(
        '[{"type": "alias", "string_to_replace": "A", "alias": "B"},'
        ' {"type": "alias", "string_to_replace": "B", "alias": "A"}]'
    )
    refused = run(url, "lexicons", "add", "--key", key_id, "--file", str(looping), ok=False)
    assert "the aliases loop" in refused
    assert "no key with id" in run(
        url, "lexicons", "add", "--key", "key_none", "--file", str(rules), ok=False
    )
