"""The fixed text set every benchmark phase speaks, so server and in-process runs compare."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

TextKind = Literal["short", "medium"]


@dataclass(frozen=True)
class Text:
    kind: TextKind
    text: str


# Short ones (~1-2 s of speech) stress time to first audio; medium ones (~6-10 s, several
# sentences) stress throughput and streaming. Interleaved, so a prefix of any length mixes both.
TEXTS: tuple[Text, ...] = (
    Text("short", "Hello, how can I help you today?"),
    Text(
        "medium",
        "The quarterly report is ready for review. Revenue grew by eight percent, while costs "
        "stayed flat, and the team expects similar results next quarter.",
    ),
    Text("short", "Your order has shipped."),
    Text(
        "medium",
        "Turn left at the next intersection, then continue straight for about two miles. "
        "Your destination will be on the right, just past the gas station.",
    ),
    Text("short", "Please hold while I check that for you."),
    Text(
        "medium",
        "Welcome back! Before we begin, please make sure your microphone is working and that "
        "you are in a quiet room. The session will last about thirty minutes.",
    ),
    Text("short", "The meeting starts at three o'clock."),
    Text(
        "medium",
        "A light rain is expected this evening, clearing up overnight. Tomorrow will be sunny "
        "and mild, with a high near twenty degrees and a gentle breeze from the west.",
    ),
)
