"""Read caption files back with ffmpeg's own SRT and WebVTT demuxers (an independent parser)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import av
from av.subtitles.subtitle import AssSubtitle


@dataclass(frozen=True)
class ParsedCue:
    start: float
    end: float
    text: str


def read_captions(path: Path) -> list[ParsedCue]:
    """The cues of an `.srt` or `.vtt` file, as ffmpeg reads them (text as ASS dialogue)."""
    parsed = []
    with av.open(str(path)) as container:
        stream = container.streams.subtitles[0]
        for packet in container.demux(stream):
            if packet.pts is None or packet.duration is None:
                continue
            # Exact (time_base is a Fraction): a cue that ends where the next starts must
            # compare equal, which start + duration in floats (2.294 + 1.955) does not.
            start = float(packet.pts * stream.time_base)
            end = float((packet.pts + packet.duration) * stream.time_base)
            for subtitle in packet.decode():
                assert isinstance(subtitle, AssSubtitle)
                parsed.append(ParsedCue(start, end, subtitle.dialogue.decode()))
    return parsed
