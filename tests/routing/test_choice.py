"""Who serves a request: weight splits, stickiness, fallback order."""

from __future__ import annotations

from collections import Counter

import pytest

from speechgate.routing.choice import BUCKETS, attempt_order, bucket, pick, sampled

IDS = [f"req_{n:05d}" for n in range(10_000)]


@pytest.mark.parametrize(
    "weights",
    [
        {"old": 95, "canary": 5},
        {"old": 75, "canary": 25},
        {"old": 40, "canary": 60},
        {"a": 50, "b": 30, "c": 20},
    ],
)
def test_weights_split_10000_ids_within_2_percent(weights: dict[str, float]) -> None:
    counts = Counter(pick(weights, key) for key in IDS)
    total = sum(weights.values())
    for name, weight in weights.items():
        assert abs(counts[name] / len(IDS) - weight / total) <= 0.02, (name, counts)


def test_the_same_id_always_lands_on_the_same_provider() -> None:
    weights = {"old": 50, "canary": 50}
    first = [pick(weights, key) for key in IDS[:500]]
    assert [pick(weights, key) for key in IDS[:500]] == first
    assert {*first} == {"old", "canary"}


def test_raising_a_canary_only_moves_ids_towards_it() -> None:
    before = {key: pick({"old": 95, "canary": 5}, key) for key in IDS}
    after = {key: pick({"old": 75, "canary": 25}, key) for key in IDS}
    moved = [key for key in IDS if before[key] != after[key]]
    assert moved
    assert all(before[key] == "old" and after[key] == "canary" for key in moved)


def test_bucket_is_pinned_across_processes_and_releases() -> None:
    # Python's own hash() is salted per process; a changed hash would move every user to
    # another provider mid-canary, so the value itself is part of the contract.
    assert bucket("req_00001") == 7401
    assert all(0 <= bucket(key) < BUCKETS for key in IDS[:100])


def test_disabled_and_zero_weight_providers_get_no_first_pick() -> None:
    weights = {"old": 0, "canary": 100}
    assert {pick(weights, key) for key in IDS[:200]} == {"canary"}
    assert {pick({"old": 50, "canary": 50}, key, {"canary"}) for key in IDS[:200]} == {"old"}
    assert pick({"old": 50}, "x", {"old"}) is None


def test_attempt_order_is_pick_then_fallback_then_the_rest_by_weight() -> None:
    weights = {"a": 10, "b": 60, "c": 30, "d": 0}
    for key in IDS[:300]:
        order = attempt_order(weights, ["c", "e"], key)
        first = pick(weights, key)
        expected = [first, *[n for n in ["c", "e", "b", "a", "d"] if n != first]]
        assert order == expected


def test_attempt_order_leaves_disabled_providers_out() -> None:
    assert attempt_order({"a": 50, "b": 50}, ["c"], "k", {"a", "c"}) == ["b"]
    assert attempt_order({"a": 100}, ["b"], "k", {"a"}) == ["b"]
    assert attempt_order({"a": 100}, [], "k", {"a"}) == []


def test_sampling_takes_the_percentage_independently_of_the_split() -> None:
    chosen = [key for key in IDS if sampled(key, 10, "shadow")]
    assert abs(len(chosen) / len(IDS) - 0.10) <= 0.02
    # Not the same ids as the first 10 % of the weight buckets.
    canary = {key for key in IDS if pick({"canary": 10, "old": 90}, key) == "canary"}
    assert len(canary & set(chosen)) < len(chosen) / 2
    assert not any(sampled(key, 0, "shadow") for key in IDS)
    assert all(sampled(key, 100, "shadow") for key in IDS)
