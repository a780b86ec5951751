"""The circuit breaker's state machine, on an injected clock."""

from __future__ import annotations

from speechgate.routing.breaker import BreakerSettings, BreakerState, CircuitBreaker, Outcome


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def make(**settings: object) -> tuple[CircuitBreaker, Clock]:
    clock = Clock()
    return CircuitBreaker(BreakerSettings.model_validate(settings), clock), clock


def run(breaker: CircuitBreaker, outcome: Outcome, count: int = 1, ttfa: float = 0.1) -> None:
    for _ in range(count):
        assert breaker.allow()
        breaker.record(outcome, ttfa)


def test_defaults_are_2_percent_over_60_seconds() -> None:
    settings = BreakerSettings()
    assert (settings.error_rate, settings.window) == (0.02, 60.0)


def test_stays_closed_below_the_minimum_count_even_when_everything_fails() -> None:
    breaker, _ = make(min_requests=10)
    run(breaker, Outcome.FAILURE, 9)
    assert breaker.state is BreakerState.CLOSED


def test_opens_when_the_error_rate_passes_the_threshold() -> None:
    breaker, _ = make(min_requests=10, error_rate=0.02)
    run(breaker, Outcome.SUCCESS, 98)
    run(breaker, Outcome.FAILURE, 2)  # 2 % is not more than 2 %
    assert breaker.state is BreakerState.CLOSED
    run(breaker, Outcome.FAILURE)
    assert breaker.state is BreakerState.OPEN
    assert not breaker.allow()


def test_old_outcomes_leave_the_window() -> None:
    breaker, clock = make(min_requests=5, error_rate=0.5, window=60)
    run(breaker, Outcome.FAILURE, 4)
    clock.now += 61
    run(breaker, Outcome.SUCCESS, 4)
    run(breaker, Outcome.FAILURE)  # 1 of 5 in the window, the old 4 forgotten
    assert breaker.state is BreakerState.CLOSED
    assert breaker.status().requests == 5


def test_client_errors_do_not_count() -> None:
    breaker, _ = make(min_requests=1, error_rate=0)
    run(breaker, Outcome.NEUTRAL, 50)
    assert breaker.state is BreakerState.CLOSED
    assert breaker.status().requests == 0


def test_opens_when_p99_time_to_first_audio_exceeds_its_threshold() -> None:
    breaker, _ = make(min_requests=100, ttfa_p99=0.5)
    run(breaker, Outcome.SUCCESS, 99, ttfa=0.1)
    assert breaker.state is BreakerState.CLOSED
    run(breaker, Outcome.SUCCESS, 1, ttfa=0.4)
    assert breaker.state is BreakerState.CLOSED
    run(breaker, Outcome.SUCCESS, 2, ttfa=0.9)  # 2 of 102 slow: the p99 is slow
    assert breaker.state is BreakerState.OPEN
    assert breaker.status().ttfa_p99 == 0.9


def test_half_opens_after_open_for_and_closes_after_the_probes_succeed() -> None:
    breaker, clock = make(min_requests=1, error_rate=0, open_for=30, probes=2)
    run(breaker, Outcome.FAILURE)
    assert breaker.state is BreakerState.OPEN
    clock.now += 29.9
    assert not breaker.allow()
    clock.now += 0.1
    assert breaker.state is BreakerState.HALF_OPEN
    # Two probes at a time, no third while they run.
    assert breaker.allow()
    assert breaker.allow()
    assert not breaker.allow()
    breaker.record(Outcome.SUCCESS, 0.1)
    assert breaker.state is BreakerState.HALF_OPEN
    breaker.record(Outcome.SUCCESS, 0.1)
    assert breaker.state is BreakerState.CLOSED
    status = breaker.status()
    assert (status.requests, status.opened) == (0, 1)  # closed with an empty window


def test_a_failed_probe_opens_it_again_for_a_full_period() -> None:
    breaker, clock = make(min_requests=1, error_rate=0, open_for=30, probes=3)
    run(breaker, Outcome.FAILURE)
    clock.now += 30
    run(breaker, Outcome.SUCCESS)
    run(breaker, Outcome.FAILURE)
    assert breaker.state is BreakerState.OPEN
    clock.now += 29
    assert not breaker.allow()
    clock.now += 1
    assert breaker.allow()
    assert breaker.status().opened == 2


def test_a_neutral_probe_frees_its_slot_without_deciding() -> None:
    breaker, clock = make(min_requests=1, error_rate=0, open_for=1, probes=1)
    run(breaker, Outcome.FAILURE)
    clock.now += 1
    assert breaker.allow()
    assert not breaker.allow()
    breaker.record(Outcome.NEUTRAL)  # the client left mid-probe
    assert breaker.state is BreakerState.HALF_OPEN
    run(breaker, Outcome.SUCCESS)
    assert breaker.state is BreakerState.CLOSED


class Compared(float):
    """A time to first audio that counts how often it is compared (that is, sorted)."""

    comparisons = 0

    def __lt__(self, other: object) -> bool:
        Compared.comparisons += 1
        return float(self) < float(other)  # type: ignore[arg-type]


def test_outcomes_sort_no_times_unless_a_ttfa_limit_is_set() -> None:
    Compared.comparisons = 0
    without_limit, _ = make(min_requests=1)
    run(without_limit, Outcome.SUCCESS, 50, ttfa=Compared(0.1))
    assert Compared.comparisons == 0
    with_limit, _ = make(min_requests=1, ttfa_p99=5.0)
    run(with_limit, Outcome.SUCCESS, 50, ttfa=Compared(0.1))
    assert Compared.comparisons > 0


def test_the_failure_count_follows_the_window() -> None:
    breaker, clock = make(min_requests=100, window=60)
    run(breaker, Outcome.FAILURE, 3)
    clock.now += 30
    run(breaker, Outcome.FAILURE, 2)
    run(breaker, Outcome.SUCCESS, 2)
    assert (breaker.status().requests, breaker.status().failures) == (7, 5)
    clock.now += 31  # the first three leave
    assert (breaker.status().requests, breaker.status().failures) == (4, 2)
