"""Reading a Wyoming server's answers in tests: one event, or one whole audio answer."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import numpy as np
from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.client import AsyncTcpClient
from wyoming.event import Event

_TIMEOUT = 60.0


async def read(connection: AsyncTcpClient) -> Event:
    event = await asyncio.wait_for(connection.read_event(), _TIMEOUT)
    assert event is not None, "the server closed the connection"
    return event


@dataclass
class Audio:
    rate: int = 0
    pcm: bytearray = field(default_factory=bytearray)
    chunks: int = 0

    @property
    def samples(self) -> np.ndarray:
        return np.frombuffer(bytes(self.pcm), dtype="<i2").astype(np.float32) / 32768.0

    @property
    def duration(self) -> float:
        return len(self.pcm) / 2 / self.rate

    @property
    def rms(self) -> float:
        return float(np.sqrt(np.mean(np.square(self.samples))))


async def read_audio(connection: AsyncTcpClient) -> Audio:
    """audio-start, its chunks, audio-stop; checks the format on every event."""
    start = AudioStart.from_event(await read(connection))
    assert (start.width, start.channels) == (2, 1)
    audio = Audio(start.rate)
    while not AudioStop.is_type((event := await read(connection)).type):
        chunk = AudioChunk.from_event(event)
        assert (chunk.rate, chunk.width, chunk.channels) == (start.rate, 2, 1)
        audio.pcm += chunk.audio
        audio.chunks += 1
    return audio
