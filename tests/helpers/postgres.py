"""A throw-away PostgreSQL cluster for the tests, started by the tests themselves.

`SPEECHGATE_TEST_DATABASE_URL` (a server URL whose user may create databases) is used
instead when it is set. Otherwise the cluster is made with the installed PostgreSQL's own
`initdb` in a temporary directory and served on a free loopback port; as root, it runs as
the `postgres` user (PostgreSQL refuses to run as root). `make test` installs PostgreSQL
(scripts/system-packages.sh).
"""

from __future__ import annotations

import glob
import itertools
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from tests.helpers.server import free_port

_counter = itertools.count()


def _binaries() -> Path:
    for candidate in [
        shutil.which("initdb"),
        *sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb")),
    ]:
        if candidate:
            return Path(candidate).parent
    raise RuntimeError(
        "PostgreSQL is not installed (no initdb): apt-get install postgresql, or set "
        "SPEECHGATE_TEST_DATABASE_URL"
    )


@contextmanager
def postgres_cluster() -> Iterator[str]:
    """Yields the URL of a running server (database `postgres`, user `postgres`)."""
    given = os.environ.get("SPEECHGATE_TEST_DATABASE_URL")
    if given:
        yield given
        return
    binaries = _binaries()
    root = Path(tempfile.mkdtemp(prefix="speechgate-pg-"))
    as_user: list[str] = []
    if os.geteuid() == 0:
        shutil.chown(root, "postgres")
        as_user = ["runuser", "-u", "postgres", "--"]
    data = root / "data"
    port = free_port()

    def run(*command: str) -> None:
        subprocess.run([*as_user, *command], check=True, capture_output=True, timeout=120)

    # Throw-away: nothing is synced to disk, here or by the server (fsync=off).
    initdb = str(binaries / "initdb")
    run(initdb, "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync")
    run(
        str(binaries / "pg_ctl"),
        "-D",
        str(data),
        "-l",
        str(root / "log"),
        "-w",
        "start",
        "-o",
        f"-c listen_addresses=127.0.0.1 -c port={port} -c unix_socket_directories={root} "
        "-c fsync=off -c full_page_writes=off",
    )
    try:
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
    finally:
        run(str(binaries / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(root, ignore_errors=True)


def fresh_database(server_url: str) -> str:
    """A new, empty database on `server_url`'s server; returns its URL."""
    url = make_url(server_url).set(drivername="postgresql+psycopg")
    name = f"speechgate_test_{os.getpid()}_{next(_counter)}"
    engine = create_engine(url, isolation_level="AUTOCOMMIT")
    with engine.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    engine.dispose()
    return url.set(database=name).render_as_string(hide_password=False)
