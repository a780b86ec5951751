"""The fixed text set every benchmark phase speaks, so server and in-process runs compare."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

TextKind = Literal["short", "medium", "long"]


@dataclass(frozen=True)
class Text:
    kind: TextKind
    text: str


# Short ones stress time to first audio, medium ones throughput and streaming; interleaved, so
# a prefix of any length mixes both.
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

# Paragraphs, as an article is read aloud: the case side-by-side segments speed up
# (`speechgate.lanes`). A set of their own, not in `TEXTS`.
LONG_TEXTS: tuple[Text, ...] = (
    Text(
        "long",
        "The harbor was quiet when the first boats came back in the morning. "
        "Fishermen tied their lines and carried crates of silver fish up the ramp. "
        "A few gulls circled overhead, waiting for anything that fell from the nets. "
        "By nine o'clock the market stalls were open and the smell of coffee drifted out. "
        "Children ran between the tables while their parents argued over the prices. "
        "Old Marta sold bread from a cart that her grandfather had built by hand. "
        "Nobody could remember a morning when she had not been there with it. "
        "When the church bell rang at noon, the square slowly began to empty again.",
    ),
    Text(
        "long",
        "Before you start, make sure the device is switched off and unplugged. "
        "Remove the back cover by pressing the two tabs at the bottom of the case. "
        "Take out the old battery and check the contacts for dust or corrosion. "
        "If they look dirty, clean them gently with a dry cloth or a cotton swab. "
        "Insert the new battery with the positive side facing up, as the label shows. "
        "Put the cover back on and press until you hear both tabs click into place. "
        "Now plug the device in and hold the power button for three seconds. "
        "The light will blink twice, and then it is ready to use again.",
    ),
    Text(
        "long",
        "Sleep plays a central role in how the brain stores what it learns each day. "
        "During deep sleep, memories from the hippocampus are replayed many times. "
        "This replay seems to move them into long term storage in the cortex. "
        "People who sleep well after learning a skill often perform better the next day. "
        "Short naps can help as well, although the effect is smaller than a full night. "
        "Missing sleep, on the other hand, makes it harder to form new memories at all. "
        "Researchers are still working out exactly which stages matter the most. "
        "For now, the advice is simple: keep a regular schedule and protect your rest.",
    ),
)

TEXT_SETS = ("all", "short", "medium", "long")


def text_set(name: str) -> tuple[Text, ...]:
    if name not in TEXT_SETS:
        raise ValueError(f"the text set is one of {', '.join(TEXT_SETS)}, not {name!r}")
    if name == "long":
        return LONG_TEXTS
    return tuple(text for text in TEXTS if name in ("all", text.kind))
