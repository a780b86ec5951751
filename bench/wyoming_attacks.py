"""Attacks on the Wyoming front end, against a speechgate server this script starts on loopback.

    .venv/bin/python bench/wyoming_attacks.py --engine fake
    PYTHONPATH=/other/checkout/src .venv/bin/python bench/wyoming_attacks.py  # another version

Starts `speechgate serve --engine ENGINE --wyoming tcp://127.0.0.1:PORT` (from the sources on
PYTHONPATH) with `--server-fds` file descriptors, then runs, one after the other:

- huge-payload: `--huge-connections` connections each send `{"type": "ping",
  "payload_length": 1073741824}` and then zeros, `--huge-bytes` at most each, for as long as
  the server reads them;
- refused-text: one connection opens a stream and sends `--chunks` chunks of text with no end
  of sentence (so it all waits to be spoken, and past what a stream may hold unspoken, each
  chunk is refused), reading the server's answers;
- idle: `--idle-connections` connections that send nothing, held (each reopened when the
  server closes it) for `--seconds`, while a client asks for speech over HTTP twice a second.

Each attack gets a fresh server. Prints the gateway process's resident memory (RSS) before and
after it (and after its connections closed), the lines the server logged meanwhile, and how
many HTTP requests were served during the last. Loopback
only, bounded in connections, bytes and time; nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

MAX_CONNECTIONS = 20_000
MAX_BYTES = 2 << 30
MAX_SECONDS = 600.0
CONNECTING_AT_ONCE = 256
BLOCK = bytes(1 << 20)
SPEECH = {"model": "tts-1", "voice": "alloy", "input": "Still served?", "response_format": "wav"}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


@dataclass
class Server:
    process: subprocess.Popen[bytes]
    http: str
    wyoming_port: int
    log: Path

    def log_lines(self) -> int:
        with self.log.open("rb") as log:
            return sum(1 for _ in log)


@contextlib.contextmanager
def serve(engine: str, fds: int, workers: int) -> Iterator[Server]:
    http_port, wyoming_port = _free_port(), _free_port()

    def limit_fds() -> None:
        _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(fds, hard), hard))

    with tempfile.TemporaryDirectory(prefix="wyoming-attacks-") as data_dir:
        env = {**os.environ, "SPEECHGATE_DATA_DIR": data_dir}
        command = [
            sys.executable,
            *("-m", "speechgate.cli", "serve", "--engine", engine, "--workers", str(workers)),
            *("--port", str(http_port), "--wyoming", f"tcp://127.0.0.1:{wyoming_port}"),
        ]
        log = Path(data_dir) / "server.log"
        with log.open("wb") as output:
            process = subprocess.Popen(
                command, env=env, preexec_fn=limit_fds, stdout=output, stderr=subprocess.STDOUT
            )
        server = Server(process, f"http://127.0.0.1:{http_port}", wyoming_port, log)
        try:
            deadline = time.monotonic() + 120
            while True:
                with contextlib.suppress(httpx.HTTPError):
                    if httpx.get(f"{server.http}/readyz", timeout=2).status_code == 200:
                        break
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the server did not start")
                time.sleep(0.5)
            yield server
        finally:
            process.terminate()
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()


async def _settle() -> None:
    await asyncio.sleep(2.0)  # let the server free what it drops


async def huge_payload(server: Server, connections: int, most: int) -> None:
    header = json.dumps({"type": "ping", "payload_length": 1 << 30}).encode() + b"\n"
    before = rss_mb(server.process.pid)
    sent = [0] * connections
    writers: list[asyncio.StreamWriter] = []

    async def one(index: int) -> None:
        _, writer = await asyncio.open_connection("127.0.0.1", server.wyoming_port)
        writers.append(writer)
        try:
            writer.write(header)
            while sent[index] < most:
                writer.write(BLOCK)
                await asyncio.wait_for(writer.drain(), 10)
                sent[index] += len(BLOCK)
        except (OSError, TimeoutError):
            pass  # the server closed it (or stopped reading)

    await asyncio.gather(*(one(i) for i in range(connections)))
    during = rss_mb(server.process.pid)
    for writer in writers:
        writer.close()
    await _settle()
    after = rss_mb(server.process.pid)
    print(
        f"huge-payload ({connections} connections, {sum(sent) / 2**20:.0f} MiB sent in all): "
        f"gateway RSS {before:.0f} -> {during:.0f} MB while open (+{during - before:.0f}), "
        f"{after:.0f} MB after closing"
    )


async def refused_text(server: Server, chunks: int, chunk_chars: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", server.wyoming_port)
    before = rss_mb(server.process.pid)
    answers = 0

    async def read_all() -> None:
        nonlocal answers
        while line := await reader.readline():
            header = json.loads(line)
            await reader.readexactly(header.get("data_length") or 0)
            await reader.readexactly(header.get("payload_length") or 0)
            answers += 1

    def event(kind: str, data: dict[str, object]) -> bytes:
        body = json.dumps(data).encode()
        return json.dumps({"type": kind, "data_length": len(body)}).encode() + b"\n" + body

    reading = asyncio.create_task(read_all())
    text = "word " * (chunk_chars // 5)  # no end of sentence: it all waits to be spoken
    writer.write(event("synthesize-start", {"voice": {"name": "alloy"}}))
    sent = 0
    try:
        for _ in range(chunks):
            writer.write(event("synthesize-chunk", {"text": text}))
            await asyncio.wait_for(writer.drain(), 30)
            sent += 1
    except (OSError, TimeoutError):
        pass
    await asyncio.sleep(1.0)
    during = rss_mb(server.process.pid)
    writer.close()
    reading.cancel()
    with contextlib.suppress(BaseException):
        await reading
    await _settle()
    after = rss_mb(server.process.pid)
    print(
        f"refused-text ({sent} chunks of {len(text)} characters, {sent * len(text) / 2**20:.0f} "
        f"MiB, {answers} events answered): gateway RSS {before:.0f} -> {during:.0f} MB while "
        f"open (+{during - before:.0f}), {after:.0f} MB after closing"
    )


@dataclass
class Held:
    opened: int = 0
    closed_by_server: int = 0
    connect_errors: int = 0
    open_now: int = 0
    peak_open: int = 0


async def idle(server: Server, connections: int, seconds: float) -> None:
    before = rss_mb(server.process.pid)
    until = time.monotonic() + seconds
    held = Held()
    connecting = asyncio.Semaphore(CONNECTING_AT_ONCE)

    async def hold_one() -> None:
        while time.monotonic() < until:
            try:
                async with connecting:
                    reader, writer = await asyncio.open_connection("127.0.0.1", server.wyoming_port)
            except OSError:
                held.connect_errors += 1
                await asyncio.sleep(0.5)
                continue
            held.opened += 1
            held.open_now += 1
            held.peak_open = max(held.peak_open, held.open_now)
            try:
                async with asyncio.timeout(max(0.0, until - time.monotonic())):
                    await reader.read(1)
                held.closed_by_server += 1
                await asyncio.sleep(0.5)  # then again, as a patient attacker would
            except TimeoutError:
                pass
            except OSError:
                held.closed_by_server += 1
                await asyncio.sleep(0.5)
            finally:
                held.open_now -= 1
                writer.close()

    async def speak() -> tuple[int, int, dict[str, int]]:
        served = asked = 0
        failures: dict[str, int] = {}
        await asyncio.sleep(min(5.0, seconds / 3))  # once the connections are open
        async with httpx.AsyncClient(timeout=10) as client:
            while time.monotonic() < until - 1:
                asked += 1
                try:
                    response = await client.post(
                        f"{server.http}/v1/audio/speech",
                        json=SPEECH,
                        headers={"connection": "close"},
                    )
                    if response.status_code == 200 and response.content[:4] == b"RIFF":
                        served += 1
                    else:
                        name = f"status {response.status_code}"
                        failures[name] = failures.get(name, 0) + 1
                except httpx.HTTPError as error:
                    name = type(error).__name__
                    failures[name] = failures.get(name, 0) + 1
                await asyncio.sleep(0.5)
        return served, asked, failures

    speaking = asyncio.create_task(speak())
    await asyncio.gather(*(hold_one() for _ in range(connections)))
    served, asked, failures = await speaking
    during = rss_mb(server.process.pid)
    print(
        f"idle ({connections} connections held for {seconds:g} s): opened {held.opened}, "
        f"closed by the server {held.closed_by_server}, connect errors {held.connect_errors}, "
        f"peak open {held.peak_open}; gateway RSS {before:.0f} -> {during:.0f} MB"
    )
    print(
        f"  HTTP speech while held: {served}/{asked} served" + (f", {failures}" if failures else "")
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--engine", default="fake")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--server-fds", type=int, default=1024)
    parser.add_argument("--huge-connections", type=int, default=3)
    parser.add_argument("--huge-bytes", type=int, default=512 << 20)
    parser.add_argument("--chunks", type=int, default=60_000)
    parser.add_argument("--chunk-chars", type=int, default=3000)
    parser.add_argument("--idle-connections", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--attacks", default="huge-payload,refused-text,idle")
    args = parser.parse_args()
    if not set(args.attacks.split(",")) <= {"huge-payload", "refused-text", "idle"}:
        parser.error("--attacks: a comma-separated list of huge-payload, refused-text, idle")
    if not 0 < args.huge_bytes <= MAX_BYTES or not 0 < args.seconds <= MAX_SECONDS:
        parser.error(f"--huge-bytes up to {MAX_BYTES}, --seconds up to {MAX_SECONDS:g}")
    if not 0 < args.idle_connections <= MAX_CONNECTIONS or args.huge_connections > 16:
        parser.error(f"--idle-connections up to {MAX_CONNECTIONS}, --huge-connections up to 16")
    if args.chunks * args.chunk_chars > MAX_BYTES:
        parser.error(f"--chunks x --chunk-chars up to {MAX_BYTES}")

    # This process holds the attacking connections: as many descriptors as it may have.
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    print(
        f"each attack against a fresh server ({args.engine}, {args.server_fds} descriptors); "
        f"this process {hard} descriptors"
    )
    attacks: dict[str, Callable[[Server], Coroutine[Any, Any, None]]] = {
        "huge-payload": lambda server: huge_payload(server, args.huge_connections, args.huge_bytes),
        "refused-text": lambda server: refused_text(server, args.chunks, args.chunk_chars),
        "idle": lambda server: idle(server, args.idle_connections, args.seconds),
    }
    for name in args.attacks.split(","):
        attack = attacks[name]
        with serve(args.engine, args.server_fds, args.workers) as server:
            logged = server.log_lines()
            asyncio.run(attack(server))
            print(f"  server log lines written during the attack: {server.log_lines() - logged}")


if __name__ == "__main__":
    main()
