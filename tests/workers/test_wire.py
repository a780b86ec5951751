from __future__ import annotations

import asyncio
import socket

import pytest

from speechgate.workers import wire
from speechgate.workers.messages import Cancel, Done


def test_a_message_split_across_reads_is_reassembled() -> None:
    async def scenario() -> list[object]:
        reader = asyncio.StreamReader()
        frame = wire.encode(Done(7)) + wire.encode(Cancel(8))
        for start in range(0, len(frame), 5):  # dribbled in, as a stalled sender would
            reader.feed_data(frame[start : start + 5])
        reader.feed_eof()
        first = await wire.read_message(reader)
        second = await wire.read_message(reader)
        with pytest.raises(asyncio.IncompleteReadError):
            await wire.read_message(reader)
        return [first, second]

    assert asyncio.run(scenario()) == [Done(7), Cancel(8)]


def test_a_half_sent_message_does_not_block_the_loop() -> None:
    async def scenario() -> bool:
        reader = asyncio.StreamReader()
        reader.feed_data(wire.encode(Done(1))[:3])
        pending = asyncio.create_task(wire.read_message(reader))
        await asyncio.sleep(0)  # the loop keeps running while the frame is incomplete
        blocked = not pending.done()
        pending.cancel()
        return blocked

    assert asyncio.run(scenario())


def test_blocking_side_round_trip_and_end_of_stream() -> None:
    left, right = socket.socketpair()
    with left, right:
        wire.send(left, Done(3, cancelled=True))
        assert wire.receive(right) == Done(3, cancelled=True)
        left.close()
        with pytest.raises(EOFError):
            wire.receive(right)
