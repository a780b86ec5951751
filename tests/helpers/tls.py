"""One TLS context for all the HTTP clients that the tests create with default TLS settings.

httpx (and httpx2, under the `openai` SDK) builds a new `ssl.SSLContext` for every client and
loads a bundle of some 150 CA certificates into it: about 20 ms of CPU for each `httpx.get(...)`
and each SDK client a test makes, and a run makes thousands of them, all to plain-HTTP servers
on loopback. Two contexts built from the same arguments and the same environment are equal, so
the test process builds one per combination and shares it. What is verified does not change:
the same certificates, the same checks; a client given its own CA or certificate gets its own
context as before.
"""

from __future__ import annotations

import functools
import importlib
import os
import ssl
from collections.abc import Callable
from typing import Any

# The modules whose transports call `create_ssl_context` by this name.
_TRANSPORTS = ("httpx._transports.default", "httpx2._transports.default")


def _shared(build: Callable[..., ssl.SSLContext]) -> Callable[..., ssl.SSLContext]:
    @functools.cache
    def default(trust_env: bool, cert_file: str | None, cert_dir: str | None) -> ssl.SSLContext:
        return build(verify=True, cert=None, trust_env=trust_env)

    def create_ssl_context(verify: Any = True, cert: Any = None, trust_env: bool = True) -> Any:
        if verify is not True or cert is not None:  # a caller's own CA or certificate
            return build(verify=verify, cert=cert, trust_env=trust_env)
        if not trust_env:
            return default(False, None, None)
        # The two variables that a default context reads where `trust_env` is on.
        return default(True, os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))

    return create_ssl_context


def share_default_contexts() -> None:
    """Make every installed httpx flavour, in this process, share its default TLS contexts."""
    for name in _TRANSPORTS:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        module.create_ssl_context = _shared(module.create_ssl_context)  # type: ignore[attr-defined]
