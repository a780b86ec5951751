"""The usage recorder: batched writes off the request path, nothing lost on shutdown."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from speechgate.metering.records import UsageRecord
from speechgate.metering.store import Store
from speechgate.metering.usage_writer import UsageRecorder

NOW = datetime(2026, 5, 1, 9)


def record(i: int) -> UsageRecord:
    return UsageRecord(
        NOW, f"req_{i}", "key_a", "tts-1", "local", "espeak", "alloy", i, 1.0, 0.1, 0.5, 200
    )


def requests(store: Store) -> int:
    return sum(t.requests for t in store.usage_totals(NOW, NOW + timedelta(1)))


def test_records_wait_for_the_batch_and_close_writes_the_rest(store_url: str) -> None:
    store = Store(store_url)
    store.migrate()

    async def scenario() -> None:
        # An interval far longer than the test: only explicit flushes and close write.
        recorder = UsageRecorder(store, interval=3600)
        recorder.start()
        for i in range(5):
            recorder.record(record(i))
        assert (recorder.pending, requests(store)) == (5, 0)
        await recorder.flush()
        assert (recorder.pending, requests(store), recorder.written) == (0, 5, 5)
        for i in range(5, 8):
            recorder.record(record(i))
        await recorder.close()
        assert requests(store) == 8

    asyncio.run(scenario())
    store.close()


def test_the_background_task_flushes_on_its_own(store_url: str) -> None:
    store = Store(store_url)
    store.migrate()

    async def scenario() -> None:
        recorder = UsageRecorder(store, interval=0.01)
        recorder.start()
        recorder.record(record(1))
        async with asyncio.timeout(30):
            while recorder.written == 0:  # noqa: ASYNC110 - the recorder's own task writes
                await asyncio.sleep(0.01)
        await recorder.close()

    asyncio.run(scenario())
    assert requests(store) == 1
    store.close()


class FlakyStore(Store):
    def __init__(self) -> None:
        self.failures = 1
        self.rows: list[UsageRecord] = []

    def insert_usage(self, records: Sequence[UsageRecord]) -> None:
        if self.failures:
            self.failures -= 1
            raise ConnectionError("database away")
        self.rows += records


def test_a_failed_write_keeps_its_batch_for_the_next(caplog: pytest.LogCaptureFixture) -> None:
    store = FlakyStore()

    async def scenario() -> None:
        recorder = UsageRecorder(store, interval=3600, max_pending=3)
        recorder.record(record(1))
        recorder.record(record(2))
        with pytest.raises(ConnectionError):
            await recorder.flush()
        assert recorder.pending == 2
        recorder.record(record(3))
        recorder.record(record(4))  # over max_pending: the oldest goes
        await recorder.flush()

    asyncio.run(scenario())
    assert [r.request_id for r in store.rows] == ["req_2", "req_3", "req_4"]
    assert "dropped 1 usage records" in caplog.text


class GatedStore(Store):
    """A real store whose writes wait for the test to open the gate, the first one failing
    then if `fail_first` (a database going away mid-write)."""

    def __init__(self, url: str, fail_first: bool) -> None:
        super().__init__(url)
        self.entered = threading.Event()
        self.gate = threading.Event()
        self.fail_first = fail_first

    def insert_usage(self, records: Sequence[UsageRecord]) -> None:
        self.entered.set()
        assert self.gate.wait(30)
        if self.fail_first:
            self.fail_first = False
            raise ConnectionError("database away")
        super().insert_usage(records)


@pytest.mark.parametrize("fails", [False, True], ids=["write-succeeds", "write-fails"])
def test_a_cancelled_close_loses_no_batch(tmp_path: Path, fails: bool) -> None:
    store = GatedStore(f"sqlite:///{tmp_path / 'store.db'}", fail_first=fails)
    store.migrate()

    async def scenario() -> None:
        recorder = UsageRecorder(store, interval=3600)
        recorder.start()
        for i in range(3):
            recorder.record(record(i))
        closing = asyncio.create_task(recorder.close())
        assert await asyncio.to_thread(store.entered.wait, 30)  # the batch is being written
        closing.cancel()
        store.gate.set()
        with pytest.raises(asyncio.CancelledError):
            await closing
        if fails:  # the batch is kept for a later write, not dropped with the cancellation
            assert (recorder.pending, recorder.written) == (3, 0)
            await recorder.flush()
        assert (recorder.pending, recorder.written, requests(store)) == (0, 3, 3)

    asyncio.run(scenario())
    store.close()
