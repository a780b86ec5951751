"""A full disk is told as such (507 insufficient_storage), not as a generic 500."""

from __future__ import annotations

import errno
import sqlite3
from collections.abc import Iterator
from typing import NoReturn

import pytest
import sqlalchemy.exc

from tests.helpers.inprocess import InProcessApp, in_process
from tests.helpers.settings import fake_settings
from tests.helpers.tenancy import ADMIN_KEY, admin, tenancy


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessApp]:
    url = f"sqlite:///{tmp_path_factory.mktemp('store') / 'store.db'}"
    settings = fake_settings(
        auth={"mode": "keys", "admin_key": ADMIN_KEY}, store={"database_url": url}
    )
    with in_process(settings) as server:
        yield server


def _sqlite_full() -> sqlalchemy.exc.OperationalError:
    full = sqlite3.OperationalError("database or disk is full")
    full.sqlite_errorcode = sqlite3.SQLITE_FULL
    return sqlalchemy.exc.OperationalError("INSERT INTO api_keys ...", {}, full)


@pytest.mark.parametrize(
    "error",
    [OSError(errno.ENOSPC, "No space left on device"), _sqlite_full()],
    ids=["enospc", "sqlite_full"],
)
def test_a_key_created_on_a_full_disk_is_507(
    keyed: InProcessApp, monkeypatch: pytest.MonkeyPatch, error: Exception
) -> None:
    def full(*_: object) -> NoReturn:
        raise error

    monkeypatch.setattr(tenancy(keyed).store, "create_key", full)
    with admin(keyed) as client:
        response = client.post("/admin/keys", json={"name": "on a full disk"})
    assert response.status_code == 507
    body = response.json()["error"]
    assert (body["type"], body["code"]) == ("server_error", "insufficient_storage")
    assert "disk" in body["message"]
