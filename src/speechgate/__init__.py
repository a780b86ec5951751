"""speechgate: a self-hosted, OpenAI-compatible speech server for local TTS engines."""

__version__ = "0.1.0"
