"""Mistakes seen in the pattern of the weights, not replayed: a causal mask off by some keys
(mask-unasked) and a log-sum-exp without the shift (softmax-unstable, rows of 0)."""

from __future__ import annotations

import numpy as np
import pytest

from grader.diagnosis.catalogue import REFERENCE
from grader.diagnosis.describe import collapsed_rows
from grader.diagnosis.mask_pattern import unasked_mask
from grader.observation import Observation, Value
from grader.probes import Probe

RNG = np.random.default_rng(7)


def identity_probe(tq: int, tk: int, batch: tuple[int, ...] = (), name: str = "case/identity") -> Probe:
    Q, K = RNG.standard_normal((*batch, tq, 4)), RNG.standard_normal((*batch, tk, 4))
    V = np.broadcast_to(np.eye(tk), (*batch, tk, tk)).copy()
    return Probe(name, name.split("/")[0], "identity", Q, K, V)


def masked_softmax(probe: Probe, keep: np.ndarray, fill: float = -1e9) -> np.ndarray:
    s = probe.Q @ np.swapaxes(probe.K, -1, -2) / 2.0
    s = np.where(keep, s, fill)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def observed(probe: Probe, weights: np.ndarray) -> dict[str, Observation]:
    return {probe.name: Observation(probe.name, 0, "returned", 0.0, Value("ndarray", weights))}


@pytest.mark.parametrize("offset", [-1, 1, 2])
@pytest.mark.parametrize("batch", [(), (2,)])
def test_a_causal_mask_off_by_some_keys_is_named(offset: int, batch: tuple[int, ...]) -> None:
    probe = identity_probe(6, 7, batch)
    keep = np.tril(np.ones((6, 7), dtype=bool), k=offset)
    d = unasked_mask({probe.name: probe}, observed(probe, masked_softmax(probe, keep)), ("weights",))
    assert d is not None and d.name == "mask-unasked"
    assert f"off by {offset:+d}" in d.message and d.checks == ("weights",)


def wrong_but_unmasked(probe: Probe) -> dict[str, np.ndarray]:
    weights = masked_softmax(probe, np.ones((6, 7), dtype=bool))
    relu = np.maximum(probe.Q @ np.swapaxes(probe.K, -1, -2), 0)  # zeros, but anywhere in a row
    prefix = weights.copy()
    prefix[..., :2] = 0  # the first keys hidden: no causal shape
    shrinking = masked_softmax(probe, np.triu(np.ones((6, 7), dtype=bool)))  # later queries see less
    return {"unmasked": weights, "relu": relu, "prefix": prefix, "anti-causal": shrinking}


@pytest.mark.parametrize("kind", ["unmasked", "relu", "prefix", "anti-causal"])
def test_zeros_of_another_shape_are_not_a_mask(kind: str) -> None:
    probe = identity_probe(6, 7)
    weights = wrong_but_unmasked(probe)[kind]
    assert unasked_mask({probe.name: probe}, observed(probe, weights), ("weights",)) is None


def test_every_identity_probe_must_show_it() -> None:
    first, second = identity_probe(6, 7, name="a/identity"), identity_probe(6, 7, name="b/identity")
    keep = np.tril(np.ones((6, 7), dtype=bool), k=-1)
    seen = {**observed(first, masked_softmax(first, keep)), **observed(second, masked_softmax(second, np.ones((6, 7), dtype=bool)))}
    assert unasked_mask({first.name: first, second.name: second}, seen, ("weights",)) is None


def large_probe() -> Probe:
    Q, K = RNG.standard_normal((5, 8)) * 64, RNG.standard_normal((7, 8)) * 64
    return Probe("large/identity", "large", "identity", Q, K, np.eye(7), magnitude=64.0)


def test_rows_of_zeros_where_exp_overflows_are_an_unshifted_log_sum_exp() -> None:
    probe = large_probe()
    s = REFERENCE.scores(probe.Q, probe.K, probe.V)
    with np.errstate(all="ignore"):
        unshifted = np.exp(s - np.log(np.sum(np.exp(s), axis=-1, keepdims=True)))
    rows = collapsed_rows(probe, unshifted)
    assert rows is not None and rows.any()


def test_other_wrong_rows_on_large_inputs_are_not() -> None:
    probe = large_probe()
    reference = REFERENCE(probe.Q, probe.K, probe.V)
    halved = reference / 2  # wrong everywhere, and nowhere 0
    zeroed = reference.copy()
    zeroed[0] = 0
    top = np.max(REFERENCE.scores(probe.Q, probe.K, probe.V), axis=-1)
    assert collapsed_rows(probe, halved) is None
    assert collapsed_rows(probe, reference) is None  # nothing wrong
    # A row of zeros counts only where that row's largest score overflows exp.
    assert (collapsed_rows(probe, zeroed) is not None) == bool(top[0] > 709.8)


def test_a_probe_the_mask_cannot_reach_is_no_evidence_against_it() -> None:
    """tril(diagonal=1) masks nothing of two keys: that probe fits, where a longer unmasked one
    would not. (Fresh cases draw such sizes at random.)"""
    long, short = identity_probe(6, 7, name="long/identity"), identity_probe(5, 2, name="short/identity")
    keep = np.tril(np.ones((6, 7), dtype=bool), k=1)
    seen = {**observed(long, masked_softmax(long, keep)), **observed(short, masked_softmax(short, np.ones((5, 2), dtype=bool)))}
    d = unasked_mask({long.name: long, short.name: short}, seen, ("weights",))
    assert d is not None and "off by +1" in d.message
    wide = identity_probe(5, 4, name="wide/identity")  # four keys: a mask off by +1 would hide some
    seen = {**observed(long, masked_softmax(long, keep)), **observed(wide, masked_softmax(wide, np.ones((5, 4), dtype=bool)))}
    assert unasked_mask({long.name: long, wide.name: wide}, seen, ("weights",)) is None


def test_more_queries_than_keys_count_the_keys() -> None:
    """Cross-attention shapes (T_q > T_k): rows past the mask's reach have no masked key."""
    probe = identity_probe(11, 6)
    d = unasked_mask({probe.name: probe}, observed(probe, masked_softmax(probe, np.tril(np.ones((11, 6), dtype=bool), k=1))), ("weights",))
    assert d is not None and "off by +1" in d.message
