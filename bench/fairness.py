"""Fairness under a flood: one key looping on long texts does not lock another key out.

    PYTHONPATH=src .venv/bin/python bench/fairness.py [--server-src DIR] [--seconds 60]

A Piper server with one worker, in keys mode, on loopback, started as users start it
(`speechgate serve`), from `--server-src` (default: this checkout's sources; another checkout's
`src` to compare). Key A runs `--loops` concurrent loops, each posting a 3,900-character text
and, when refused, sleeping the Retry-After it was told (at most what is left of the run); key B
posts a normal text (about 200 characters) every `--every` seconds, without retrying. Prints
B's success rate, A's served count and the largest Retry-After either was told. Bounded: the
run lasts `--seconds`, then the server is stopped.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import httpx

from speechgate.metering.key_secrets import KeyLimits
from speechgate.metering.store import Store
from speechgate.settings import Settings

SENTENCE = "The committee reviewed the proposal in detail and agreed to meet again next week. "
LONG_TEXT = (SENTENCE * 60)[:3900]
NORMAL_TEXT = (SENTENCE * 3)[:200]


def body(text: str) -> dict[str, str]:
    return {"model": "piper", "voice": "alloy", "input": text, "response_format": "pcm"}


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class Tally:
    def __init__(self) -> None:
        self.served = {"A": 0, "B": 0}
        self.refused = {"A": 0, "B": 0}
        self.other: dict[str, list[int]] = {"A": [], "B": []}
        self.retry_after: list[float] = []
        self.b_seconds: list[float] = []


async def post(client: httpx.AsyncClient, url: str, key: str, text: str) -> httpx.Response:
    headers = {"Authorization": f"Bearer {key}"}
    async with client.stream("POST", url, json=body(text), headers=headers) as response:
        await response.aread()
        return response


async def flood(client: httpx.AsyncClient, url: str, key: str, end: float, tally: Tally) -> None:
    while time.monotonic() < end:
        try:
            response = await post(client, url, key, LONG_TEXT)
        except httpx.HTTPError:
            continue
        if response.status_code == 200:
            tally.served["A"] += 1
        elif response.status_code == 429:
            tally.refused["A"] += 1
            retry = float(response.headers.get("retry-after", "1"))
            tally.retry_after.append(retry)
            await asyncio.sleep(max(0.0, min(retry, end - time.monotonic())))
        else:
            tally.other["A"].append(response.status_code)
            await asyncio.sleep(1.0)


async def normal(client: httpx.AsyncClient, url: str, key: str, tally: Tally) -> None:
    started = time.monotonic()
    try:
        response = await post(client, url, key, NORMAL_TEXT)
    except httpx.HTTPError:
        tally.other["B"].append(0)
        return
    if response.status_code == 200:
        tally.served["B"] += 1
        tally.b_seconds.append(time.monotonic() - started)
    elif response.status_code == 429:
        tally.refused["B"] += 1
        tally.retry_after.append(float(response.headers.get("retry-after", "1")))
    else:
        tally.other["B"].append(response.status_code)


async def attack(url: str, key_a: str, key_b: str, args: argparse.Namespace) -> Tally:
    tally = Tally()
    speech = f"{url}/v1/audio/speech"
    limits = httpx.Limits(max_connections=args.loops + 64)
    async with httpx.AsyncClient(timeout=args.seconds + 120, limits=limits) as client:
        end = time.monotonic() + args.seconds
        loops = [
            asyncio.create_task(flood(client, speech, key_a, end, tally)) for _ in range(args.loops)
        ]
        await asyncio.sleep(args.head_start)  # the flood first
        b: list[asyncio.Task[None]] = []
        while time.monotonic() < end:
            b.append(asyncio.create_task(normal(client, speech, key_b, tally)))
            await asyncio.sleep(args.every)
        await asyncio.gather(*b)
        for task in loops:
            task.cancel()
        await asyncio.gather(*loops, return_exceptions=True)
    return tally


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--server-src", type=Path, default=Path(__file__).parent.parent / "src")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--loops", type=int, default=4)
    parser.add_argument("--every", type=float, default=2.0)
    parser.add_argument("--head-start", type=float, default=3.0)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as data_dir:
        settings = Settings.model_validate({"data_dir": data_dir, "auth": {"mode": "keys"}})
        store = Store(settings.store_url)
        store.migrate()
        _, key_a = store.create_key("flood", KeyLimits(), datetime.now())
        _, key_b = store.create_key("normal", KeyLimits(), datetime.now())
        store.close()
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        env = {
            **os.environ,
            "PYTHONPATH": str(args.server_src.resolve()),
            "SPEECHGATE_ENGINES": "piper",
            "SPEECHGATE_DEFAULT_ENGINE": "piper",
            "SPEECHGATE_POOL__WORKERS": "1",
            "SPEECHGATE_AUTH__MODE": "keys",
            "SPEECHGATE_DATA_DIR": data_dir,
        }
        command = [sys.executable, "-m", "speechgate.cli", "serve", "--port", str(port)]
        log = Path(data_dir) / "server.log"
        with log.open("w") as output:
            server = subprocess.Popen(command, env=env, stdout=output, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 120
            while True:
                assert server.poll() is None, log.read_text()[-3000:]
                assert time.monotonic() < deadline, "the server did not become ready"
                try:
                    if httpx.get(f"{url}/readyz").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                time.sleep(0.2)
            tally = asyncio.run(attack(url, key_a, key_b, args))
        finally:
            server.terminate()
            try:
                server.wait(30)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()

    attempts = tally.served["B"] + tally.refused["B"] + len(tally.other["B"])
    print(f"server sources: {args.server_src}")
    print(
        f"key A ({args.loops} loops, {len(LONG_TEXT)} chars): served {tally.served['A']}, "
        f"refused {tally.refused['A']}, other {tally.other['A']}"
    )
    rate = tally.served["B"] / attempts if attempts else 0.0
    print(
        f"key B ({len(NORMAL_TEXT)} chars every {args.every:g} s): served {tally.served['B']}"
        f"/{attempts} ({rate:.0%}), refused {tally.refused['B']}, other {tally.other['B']}"
    )
    if tally.b_seconds:
        print(f"key B whole request: median {statistics.median(tally.b_seconds):.2f} s")
    print(f"largest Retry-After told: {max(tally.retry_after, default=0):g} s")


if __name__ == "__main__":
    main()
