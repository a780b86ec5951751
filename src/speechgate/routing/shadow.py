"""Shadow traffic: a sampled copy of a route's requests goes to a shadow provider, whose answer
is compared with what the client got. The client never waits for it.

For each pair: both times to first audio, both request durations, both audio durations, their
difference, and whether the decoded PCM is identical (a deterministic engine behind both
sides should give the same samples; a lossy format is compared after decoding).
"""

from __future__ import annotations

import io
from collections import deque
from dataclasses import asdict, dataclass
from typing import Any

import av
import numpy as np

from speechgate.audio.formats import AudioFormat

# ffmpeg's demuxer for each response format (raw pcm needs none).
_DEMUXERS = {
    AudioFormat.MP3: "mp3",
    AudioFormat.OPUS: "ogg",
    AudioFormat.AAC: "aac",
    AudioFormat.FLAC: "flac",
    AudioFormat.WAV: "wav",
    AudioFormat.ULAW: "mulaw",
    AudioFormat.ALAW: "alaw",
}
# A response body kept for comparison, at most: 4096 characters of speech as 48 kHz WAV fit.
MAX_COMPARED_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class Sample:
    """One side of a pair, measured where the client would have measured it."""

    provider: str
    time_to_first_audio: float
    elapsed: float
    body: bytes


@dataclass(frozen=True)
class ShadowPair:
    route: str
    primary: str
    shadow: str
    primary_ttfa: float
    shadow_ttfa: float | None
    primary_elapsed: float
    shadow_elapsed: float | None
    primary_audio_seconds: float | None
    shadow_audio_seconds: float | None
    identical: bool | None
    """Whether the decoded samples are equal; None when a side failed or cannot be decoded."""
    duration_difference: float | None
    """Shadow's audio seconds minus the primary's."""
    shadow_error: str | None = None


def decode_pcm(data: bytes, format: AudioFormat, pcm_rate: int) -> tuple[bytes, int]:
    """Mono s16 samples of a whole response body, and their rate. Raises ValueError if the
    body cannot be decoded as `format`."""
    if format is AudioFormat.PCM:
        return data[: len(data) // 2 * 2], pcm_rate
    try:
        # Headerless G.711 cannot say its rate.
        raw = format in (AudioFormat.ULAW, AudioFormat.ALAW)
        options = {"sample_rate": str(pcm_rate)} if raw else {}
        with av.open(
            io.BytesIO(data), mode="r", format=_DEMUXERS[format], options=options
        ) as container:
            resampler = av.AudioResampler(format="s16", layout="mono")
            frames = [
                out
                for frame in container.decode(container.streams.audio[0])
                for out in resampler.resample(frame)
            ]
            frames += resampler.resample(None)
    except (av.FFmpegError, IndexError) as error:
        raise ValueError(f"cannot decode {format.value}: {error}") from error
    if not frames:
        return b"", pcm_rate
    samples = np.concatenate([frame.to_ndarray().reshape(-1) for frame in frames])
    return samples.astype("<i2").tobytes(), frames[0].sample_rate


def compare(
    route: str, primary: Sample, shadow: Sample, format: AudioFormat, pcm_rate: int
) -> ShadowPair:
    """The pair's figures; CPU work (decoding), so run it off the event loop."""
    try:
        ours, our_rate = decode_pcm(primary.body, format, pcm_rate)
        theirs, their_rate = decode_pcm(shadow.body, format, pcm_rate)
    except ValueError as error:
        return _pair(route, primary, shadow, None, None, None, f"undecodable: {error}")
    primary_seconds = len(ours) / 2 / our_rate
    shadow_seconds = len(theirs) / 2 / their_rate
    identical = ours == theirs and our_rate == their_rate
    return _pair(route, primary, shadow, primary_seconds, shadow_seconds, identical)


def failed(
    route: str, primary: Sample | None, shadow: str, primary_name: str, error: str
) -> ShadowPair:
    """A pair whose shadow side failed (or whose primary did not complete)."""
    return ShadowPair(
        route=route,
        primary=primary_name,
        shadow=shadow,
        primary_ttfa=primary.time_to_first_audio if primary else 0.0,
        shadow_ttfa=None,
        primary_elapsed=primary.elapsed if primary else 0.0,
        shadow_elapsed=None,
        primary_audio_seconds=None,
        shadow_audio_seconds=None,
        identical=None,
        duration_difference=None,
        shadow_error=error,
    )


def _pair(
    route: str,
    primary: Sample,
    shadow: Sample,
    primary_seconds: float | None,
    shadow_seconds: float | None,
    identical: bool | None,
    error: str | None = None,
) -> ShadowPair:
    return ShadowPair(
        route=route,
        primary=primary.provider,
        shadow=shadow.provider,
        primary_ttfa=primary.time_to_first_audio,
        shadow_ttfa=shadow.time_to_first_audio,
        primary_elapsed=primary.elapsed,
        shadow_elapsed=shadow.elapsed,
        primary_audio_seconds=primary_seconds,
        shadow_audio_seconds=shadow_seconds,
        identical=identical,
        duration_difference=(
            None
            if primary_seconds is None or shadow_seconds is None
            else shadow_seconds - primary_seconds
        ),
        shadow_error=error,
    )


class ShadowLog:
    """The latest pairs and running totals per route (for the admin report)."""

    def __init__(self, keep: int = 100) -> None:
        self._recent: deque[ShadowPair] = deque(maxlen=keep)
        self._totals: dict[str, dict[str, float]] = {}

    def record(self, pair: ShadowPair) -> None:
        self._recent.append(pair)
        totals = self._totals.setdefault(
            pair.route,
            dict.fromkeys(("pairs", "identical", "different", "failed", "abs_duration_diff"), 0.0),
        )
        totals["pairs"] += 1
        if pair.identical is None:
            totals["failed"] += 1
        else:
            totals["identical" if pair.identical else "different"] += 1
        totals["abs_duration_diff"] += abs(pair.duration_difference or 0.0)

    @property
    def recent(self) -> list[ShadowPair]:
        return list(self._recent)

    def report(self) -> dict[str, Any]:
        routes = {}
        for route, totals in self._totals.items():
            compared = totals["identical"] + totals["different"]
            routes[route] = {
                "pairs": int(totals["pairs"]),
                "identical": int(totals["identical"]),
                "different": int(totals["different"]),
                "failed": int(totals["failed"]),
                "mean_abs_duration_difference": (
                    totals["abs_duration_diff"] / compared if compared else None
                ),
            }
        return {"routes": routes, "recent": [asdict(pair) for pair in self._recent]}
