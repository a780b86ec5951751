"""Home Assistant's Wyoming protocol, served beside the HTTP API on the same engine pools."""

from speechgate.wyoming.listener import start

__all__ = ["start"]
