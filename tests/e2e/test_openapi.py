"""The served OpenAPI document, and a schemathesis run over it against the real server.

schemathesis and hypothesis are imported in the test that runs them: with their pytest plugins
off (pyproject.toml), no other test process imports them, not even to collect this module.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import httpx
import pytest

from tests.helpers.server import RunningServer

if TYPE_CHECKING:
    import schemathesis
    from hypothesis.strategies import SearchStrategy
    from schemathesis.schemas import APIOperation

pytestmark = pytest.mark.slow


def test_openapi_document_is_served(server: RunningServer) -> None:
    document = httpx.get(f"{server.url}/openapi.json", timeout=10).json()
    assert "/v1/audio/speech" in document["paths"]
    assert "/v1/audio/voices" in document["paths"]


def _speakable(case: schemathesis.Case) -> schemathesis.Case:
    """Point a generated speech request at a real model and voice, so the fuzzed text, speed,
    format and sample rate reach the engine instead of stopping at a 404."""
    if isinstance(case.body, dict):
        case.body = {**case.body, "model": "espeak", "voice": "alloy"}
    return case


# Examples per strategy: every operation gets each of its strategies, five cases apiece (about
# 900 requests in all; ten doubled the run, ~10 ms a request, for cases alike to these), and
# ten where the fuzzed body reaches real synthesis, the deepest path a case can take.
EXAMPLES = 5
SPEAKABLE_EXAMPLES = 10


def strategies(operation: APIOperation) -> list[tuple[SearchStrategy[schemathesis.Case], int]]:
    from schemathesis.generation.meta import TestPhase
    from schemathesis.generation.modes import GenerationMode

    found = [
        (operation.as_strategy(GenerationMode.POSITIVE), EXAMPLES),
        (operation.as_strategy(GenerationMode.POSITIVE, phase=TestPhase.EXAMPLES), EXAMPLES),
    ]
    if len(operation.body):
        # Free-form string parameters have no invalid values; bodies do.
        found.append((operation.as_strategy(GenerationMode.NEGATIVE), EXAMPLES))
    if operation.method.upper() == "POST":
        speakable = operation.as_strategy(GenerationMode.POSITIVE).map(_speakable)
        found.append((speakable, SPEAKABLE_EXAMPLES))
    return found


def test_api_conforms_to_its_schema(server: RunningServer) -> None:
    """No 5xx, and every response matches its documented status, content type and schema."""
    import schemathesis
    from hypothesis import HealthCheck, given, settings
    from schemathesis.checks import not_a_server_error
    from schemathesis.specs.openapi.checks import (
        content_type_conformance,
        response_schema_conformance,
        status_code_conformance,
    )

    checks = [
        not_a_server_error,
        status_code_conformance,
        content_type_conformance,
        response_schema_conformance,
    ]
    schema = schemathesis.openapi.from_url(f"{server.url}/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 7
    statuses: list[int] = []

    for operation in operations:
        for strategy, examples in strategies(operation):

            @given(case=strategy)
            @settings(
                max_examples=examples,
                deadline=None,
                database=None,
                suppress_health_check=list(HealthCheck),
            )
            def conforms(case: schemathesis.Case) -> None:
                response = case.call_and_validate(base_url=server.url, checks=checks)
                statuses.append(response.status_code)

            conforms()

    # The run reached real synthesis, not only the validation errors.
    assert statuses.count(200) > 20
