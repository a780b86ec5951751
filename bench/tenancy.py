"""What keys, limits and metering cost: added latency per request, and usage rows per second.

    PYTHONPATH=. .venv/bin/python bench/tenancy.py [--requests 300] [--records 20000] [--postgres]

(PYTHONPATH=. for the test helpers it reuses: the loopback server and, with --postgres, the
throw-away PostgreSQL cluster.)

1. Three servers in one run, each with one espeak worker: auth `none` and metering off (the
   baseline), auth `none` with metering, and auth `keys` with a key that has every limit (rate,
   burst, concurrency, monthly quota) and metering. Requests for a short text alternate
   between them, one at a time, so drift on a shared machine falls on all three alike; prints
   p50 and p90 of the whole request and the p50 added to the baseline.
2. The hot path alone, in process: authenticate (key cached) + admit + release + record.
3. Usage records written per second: batches straight into the store, SQLite (and PostgreSQL
   with --postgres), and through the recorder's batched writes.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from datetime import datetime
from pathlib import Path

import httpx
from tests.helpers.postgres import fresh_database, postgres_cluster
from tests.helpers.server import RunningServer, running_server

from speechgate.metering.key_secrets import KeyLimits
from speechgate.metering.records import UsageRecord
from speechgate.metering.store import Store
from speechgate.metering.tenancy import Tenancy
from speechgate.metering.usage_writer import UsageRecorder
from speechgate.settings import Settings

BODY = {"model": "espeak", "voice": "alloy", "input": "Hi there.", "response_format": "pcm"}
ADMIN_KEY = "bench-admin-" + "x" * 32
LIMITS = KeyLimits(
    requests_per_second=1e9, burst=10**9, max_concurrent=8, monthly_characters=10**15
)


def settings(data_dir: Path, **overrides: object) -> Settings:
    return Settings.model_validate(
        {
            "engines": ["espeak"],
            "default_engine": "espeak",
            "pool": {"workers": 1},
            "data_dir": data_dir,
            **overrides,
        }
    )


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def latency(requests: int, root: Path) -> None:
    variants = {
        "auth none, metering off": settings(root / "a", usage={"metering": False}),
        "auth none, metering on": settings(root / "b"),
        "auth keys + limits + metering": settings(root / "c", auth={"mode": "keys"}),
    }
    secret = Store(variants["auth keys + limits + metering"].store_url)
    secret.migrate()
    _, key = secret.create_key("bench", LIMITS, datetime.now())
    secret.close()
    times: dict[str, list[float]] = {name: [] for name in variants}
    servers: dict[str, RunningServer] = {}
    with (
        running_server(variants["auth none, metering off"]) as servers["auth none, metering off"],
        running_server(variants["auth none, metering on"]) as servers["auth none, metering on"],
        running_server(variants["auth keys + limits + metering"]) as servers[
            "auth keys + limits + metering"
        ],
        httpx.Client(timeout=30, headers={"Authorization": f"Bearer {key}"}) as client,
    ):
        for round_ in range(requests + 20):
            for name, server in servers.items():
                started = time.perf_counter()
                response = client.post(f"{server.url}/v1/audio/speech", json=BODY)
                elapsed = time.perf_counter() - started
                assert response.status_code == 200, response.text
                if round_ >= 20:  # warm-up: connections, caches, first jobs
                    times[name].append(elapsed)
        written = servers["auth keys + limits + metering"].state.tenancy.recorder
    base = statistics.median(times["auth none, metering off"])
    print(f"\n1. Whole request, {requests} each, interleaved (espeak, {BODY['input']!r}, pcm)")
    print(f"{'':32} {'p50 ms':>8} {'p90 ms':>8} {'p50 added ms':>13}")
    for name, values in times.items():
        p50 = statistics.median(values)
        print(
            f"{name:32} {p50 * 1e3:8.2f} {percentile(values, 0.9) * 1e3:8.2f} "
            f"{(p50 - base) * 1e3:13.2f}"
        )
    print(f"   usage records written by the keyed server: {written.written}")


def hot_path(root: Path, calls: int = 20_000) -> None:
    config = settings(root / "hot", auth={"mode": "keys"})
    store = Store(config.store_url)
    store.migrate()
    _, key = store.create_key("hot", LIMITS, datetime.now())

    async def run() -> float:
        recorder = UsageRecorder(store, interval=3600)
        tenancy = Tenancy(config, store, recorder)
        header = f"Bearer {key}"
        principal = await tenancy.authenticate(header)  # fills the key cache
        record = UsageRecord(
            datetime.now(),
            "r",
            principal.key_id,
            "tts-1",
            "local",
            "espeak",
            "alloy",
            9,
            0.5,
            0.01,
            0.02,
            200,
        )
        await tenancy.admit(principal, "tts-1", 9)  # loads the month's quota
        started = time.perf_counter()
        for _ in range(calls):
            principal = await tenancy.authenticate(header)
            admission = await tenancy.admit(principal, "tts-1", 9)
            tenancy.release(admission, billable=True)
            tenancy.record(record)
        elapsed = time.perf_counter() - started
        await recorder.close()
        return elapsed

    elapsed = asyncio.run(run())
    print(
        f"\n2. In process: authenticate + admit + release + record: "
        f"{elapsed / calls * 1e6:.1f} us per request ({calls} requests)"
    )
    store.close()


def records_per_second(url: str, label: str, records: int) -> None:
    store = Store(url)
    store.migrate()
    batch = [
        UsageRecord(
            datetime.now(),
            f"req_{i}",
            "key_x",
            "tts-1",
            "local",
            "espeak",
            "alloy",
            40,
            2.5,
            0.05,
            0.3,
            200,
        )
        for i in range(records)
    ]
    for size in (100, 1000):
        started = time.perf_counter()
        for start in range(0, records, size):
            store.insert_usage(batch[start : start + size])
        rate = records / (time.perf_counter() - started)
        print(f"   {label:10} batches of {size:5}: {rate:10,.0f} records/s")

    async def through_recorder() -> float:
        recorder = UsageRecorder(store, interval=3600)
        started = time.perf_counter()
        for start in range(0, records, 1000):
            for record in batch[start : start + 1000]:
                recorder.record(record)
            await recorder.flush()
        return records / (time.perf_counter() - started)

    print(f"   {label:10} via the recorder:  {asyncio.run(through_recorder()):10,.0f} records/s")
    store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--postgres", action="store_true")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="speechgate-bench-"))
    latency(args.requests, root)
    hot_path(root)
    print("\n3. Usage records written per second")
    records_per_second(f"sqlite:///{root / 'records.db'}", "SQLite", args.records)
    if args.postgres:
        with postgres_cluster() as server:
            records_per_second(fresh_database(server), "PostgreSQL", args.records)


if __name__ == "__main__":
    main()
