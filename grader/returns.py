"""Return conventions: a function may return ``(output, weights)`` or ``(weights, output)``.

Many public implementations return the attention weights beside the output. The two are told
apart by shape: the output is (..., T_q, d_v), the weights (..., T_q, T_k). Where those shapes
coincide (T_k = d_v), the order the submission used on the probes where they differ decides; if
no probe tells, the item whose rows are a probability distribution is the weights, and failing
that the usual order (output first) is assumed.

Two items of the weights' shape and none of the output's (``return w, w``) are the weights
returned in the output's place, as a bare ``return w`` is: the first is judged as the output
(the diagnosis names returns-weights), the second as the weights. A ``None`` beside an array
(``return out, None``, nn.MultiheadAttention's ``need_weights=False``, or ``None, out``) carries
no weights to judge: the array is judged as the output, alone.

After :func:`split_returns` every check and diagnosis sees the output as the returned array, and
the returned weights are checked directly against the reference weights as well
(:func:`returned_weights_results`).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from typing import Literal

import numpy as np

from grader.checks.base import CaseResult, CheckContext
from grader.compare import compare
from grader.observation import Value, WorkerRun
from grader.probes import Probe, probe_name

Order = Literal["output-first", "weights-first"]


def _shapes(probe: Probe) -> tuple[tuple[int, ...], tuple[int, ...]]:
    lead = tuple(probe.Q.shape[:-1])
    return lead + (probe.V.shape[-1],), lead + (probe.K.shape[-2],)


def _pair(value: Value | None) -> tuple[np.ndarray, np.ndarray] | None:
    if value is None or value.array is not None or value.items is None or len(value.items) != 2:
        return None
    first, second = value.items
    if first.array is None or second.array is None:
        return None
    return first.array, second.array


def _is_none(item: Value) -> bool:
    # The worker names the type as it reads (grader.sandbox.worker.type_name): builtins' None is
    # "NoneType". An object dressed up as one only has its array judged alone, as `return out` is.
    return item.array is None and item.items is None and item.type == "NoneType"


def _beside_none(value: Value | None) -> np.ndarray | None:
    """The array of a returned (array, None) or (None, array)."""
    if value is None or value.array is not None or value.items is None or len(value.items) != 2:
        return None
    first, second = value.items
    if first.array is not None and _is_none(second):
        return first.array
    if second.array is not None and _is_none(first):
        return second.array
    return None


def _order_by_shape(pair: tuple[np.ndarray, np.ndarray], probe: Probe) -> Order | None:
    output, weights = _shapes(probe)
    if output == weights:
        return None
    if pair[0].shape == output and pair[1].shape == weights:
        return "output-first"
    if pair[0].shape == weights and pair[1].shape == output:
        return "weights-first"
    return None


def _looks_like_weights(array: np.ndarray) -> bool:
    with np.errstate(all="ignore"):
        a = array.astype(np.float64)
        return bool(a.size and np.all(a >= -1e-9) and np.allclose(a.sum(axis=-1), 1.0, atol=1e-4))


def split_returns(run: WorkerRun, probes: list[Probe]) -> tuple[WorkerRun, Order | None]:
    """The run with every returned pair turned into (output, weights), and the order seen."""
    by_name = {p.name: p for p in probes}
    pairs = {key: pair for key, obs in run.observations.items() if key[0] in by_name and (pair := _pair(obs.value)) is not None}
    alone = {key: found for key, obs in run.observations.items() if key[0] in by_name and (found := _beside_none(obs.value)) is not None}
    if not pairs and not alone:
        return run, None
    votes = Counter(o for (name, _), pair in pairs.items() if (o := _order_by_shape(pair, by_name[name])) is not None)
    order: Order | None = votes.most_common(1)[0][0] if votes else None
    observations = dict(run.observations)
    seen: Order | None = order
    for key, pair in pairs.items():
        probe = by_name[key[0]]
        this = _order_by_shape(pair, probe) or order
        if this is None:
            this = "weights-first" if _looks_like_weights(pair[0]) and not _looks_like_weights(pair[1]) else "output-first"
        output, weights = pair if this == "output-first" else (pair[1], pair[0])
        if output.shape != _shapes(probe)[0]:
            if not (pair[0].shape == pair[1].shape == _shapes(probe)[1]):
                continue  # not a recognisable pair for this probe: judged as returned (bad-return)
            # Two weight matrices and no output: the weights in the output's place, judged as
            # the first item (the catalogue names returns-weights, and what else it does).
            output, weights, this = pair[0], pair[1], "output-first"
        seen = seen or this
        value = run.observations[key].value
        assert value is not None
        observations[key] = replace(run.observations[key], value=replace(value, array=output, weights=weights))
    for key, output in alone.items():
        # No order is reported for these: the report's "(output, weights)" would claim weights.
        value = run.observations[key].value
        assert value is not None
        observations[key] = replace(run.observations[key], value=replace(value, array=output))
    return replace(run, observations=observations), seen


def returned_weights_results(ctx: CheckContext, cases: tuple[str, ...]) -> list[CaseResult]:
    """For a function that returns its weights: those weights, on the random-V probe of each case,
    against the stored reference weights."""
    results = []
    for case in cases:
        probe = probe_name(case, "values")
        obs = ctx.run.get(probe)
        if obs is None or obs.value is None or obs.value.weights is None:
            continue
        expected = ctx.refs.cases[case].weights
        weights = obs.value.weights
        if weights.shape != expected.shape or weights.dtype.kind not in "fc":
            results.append(CaseResult(case, probe, "returned weights", False, f"returned weights of shape {tuple(weights.shape)} and dtype {weights.dtype}, expected {expected.shape}", expected=expected))
            continue
        mismatch = compare(weights, expected, ctx.suite.tolerance)
        results.append(CaseResult(case, probe, "returned weights", mismatch.ok, mismatch.describe(), mismatch, actual=weights, expected=expected))
    return results
