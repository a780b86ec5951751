"""Usage records, written in batches off the request path.

A crash loses at most the last `interval`'s records. A failed write keeps its batch for the
next, up to `max_pending` records, beyond which the oldest are dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from speechgate.metering.records import UsageRecord
from speechgate.metering.store import Store

log = logging.getLogger(__name__)


class UsageRecorder:
    def __init__(self, store: Store, interval: float, max_pending: int = 100_000) -> None:
        self._store = store
        self._interval = interval
        self._max_pending = max_pending
        self._pending: list[UsageRecord] = []
        self._task: asyncio.Task[None] | None = None
        # One write at a time, so that records reach the store in the order they ended.
        self._writing = asyncio.Lock()
        self.written = 0

    def start(self) -> None:
        self._task = asyncio.create_task(self._flush_periodically(), name="usage-recorder")

    def record(self, record: UsageRecord) -> None:
        self._pending.append(record)
        overflow = len(self._pending) - self._max_pending
        if overflow > 0:
            del self._pending[:overflow]
            log.error("usage store unreachable: dropped %d usage records", overflow)

    @property
    def pending(self) -> int:
        return len(self._pending)

    async def flush(self) -> None:
        """Write every record so far; a cancellation of the caller waits for the write."""
        async with self._writing:
            batch, self._pending = self._pending, []
            write = asyncio.ensure_future(asyncio.to_thread(self._store.insert_usage, batch))
            cancelled = await _wait_out(write)
            error = write.exception()
            if error is None:
                self.written += len(batch)
            else:
                log.error(
                    "writing %d usage records failed; retrying later", len(batch), exc_info=error
                )
                self._pending[:0] = batch
            if cancelled:
                raise asyncio.CancelledError
            if error is not None:
                raise error

    async def close(self) -> None:
        """Stop the periodic writes and write what is left, even if the caller is cancelled."""
        closing = asyncio.ensure_future(self._close())
        if await _wait_out(closing):
            raise asyncio.CancelledError from closing.exception()
        closing.result()

    async def _close(self) -> None:
        if self._task is not None:
            self._task.cancel()  # a write under way finishes first (see flush)
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self.flush()

    async def _flush_periodically(self) -> None:
        while True:
            await asyncio.sleep(self._interval)
            with contextlib.suppress(Exception):  # logged by flush; the batch is kept
                await self.flush()


async def _wait_out(future: asyncio.Future[None]) -> bool:
    """Waits until `future` is done through any cancellation; whether there was one."""
    cancelled = False
    while not future.done():
        try:
            await asyncio.wait({future})
        except asyncio.CancelledError:
            cancelled = True
    return cancelled
