"""Property tests of the judgement on random shapes and inputs (hypothesis).

The engine is a pure function of probes and observations, so these run in-process with no worker:
random probe sets like the suite's (single sequences, a batch, a B = T = d batch, a multi-head
batch, a large-input case), observed from implementations written here or from the catalogue's
own variants.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from grader.attention import softmax
from grader.diagnosis.catalogue import REFERENCE, Variant, all_variants
from grader.diagnosis.engine import name_mistakes
from grader.diagnosis.scale_fit import fit_scale
from grader.probes import Probe, identity_values
from grader.refdata import GRID
from grader.suite import Shape, Tolerance
from observing import Impl, observe_probe, named_mistakes


TOLERANCE = Tolerance(rtol=1e-4, atol=1e-6)
SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _inputs(rng: np.random.Generator, shape: Shape, magnitude: float = 1.0) -> tuple[np.ndarray, ...]:
    return tuple(np.round(rng.standard_normal(dims) * magnitude * GRID) / GRID for dims in (shape.q(), shape.k(), shape.v()))


def _sizes(rng: np.random.Generator, count: int, low: int, high: int, avoid: tuple[int, ...] = ()) -> list[int]:
    """``count`` different sizes in [low, high), none of them in ``avoid``."""
    return [int(n) for n in rng.permutation(np.arange(low, high)) if n not in avoid][:count]


def _shape(rng: np.random.Generator, batch: tuple[int, ...], avoid_dk: tuple[int, ...] = ()) -> Shape:
    dk = _sizes(rng, 1, 2, 48, batch + avoid_dk)[0]
    tq, tk, dv = _sizes(rng, 3, 2, 14, batch + (dk,))
    return Shape(batch, tq, tk, dk, dv)


def make_probes(seed: int) -> list[Probe]:
    """Probes shaped like the suite's, every size drawn at random but all sizes of a case
    different (and the single sequences of different d_k), so that no mix-up of axes hides."""
    rng = np.random.default_rng(seed)
    first = _shape(rng, ())
    second = _shape(rng, (), (first.dk,))
    b, h = _sizes(rng, 2, 2, 5)
    n = int(rng.integers(3, 6))
    shapes = [
        ("single0", first, 1.0),
        ("single1", second, 1.0),
        ("batch", _shape(rng, (b,)), 1.0),
        ("square", Shape((n,), n, n, n, n), 1.0),
        ("multihead", _shape(rng, (b, h)), 1.0),
        ("large", Shape((), *_sizes(rng, 4, 2, 9)), 64.0),
    ]
    probes = []
    for case, shape, magnitude in shapes:
        Q, K, V = _inputs(rng, shape, magnitude)
        probes.append(Probe(f"{case}/values", case, "values", Q, K, V, magnitude=magnitude))
        probes.append(Probe(f"{case}/identity", case, "identity", Q, K, identity_values(shape.tk, shape.batch), magnitude=magnitude))
    return probes


# A seed stands for a probe set: a failing example then reads as two numbers, not arrays.
probe_sets = st.integers(0, 2**32 - 1).map(make_probes)


def names_for(probes: list[Probe], impl: Impl) -> list[str]:
    observed = {p.name: observe_probe(p, impl) for p in probes}
    return [d.name for d in name_mistakes({p.name: p for p in probes}, observed, TOLERANCE)]


# -- an injected scale is recovered -------------------------------------------------------------


@SETTINGS
@given(probe_sets, st.floats(0.02, 3.0))
def test_an_injected_scale_is_fitted_within_one_percent(probes: list[Probe], scale: float) -> None:
    for probe in probes:
        if probe.kind != "identity" or probe.magnitude > 1.0:
            continue
        weights = softmax(scale * (probe.Q @ np.swapaxes(probe.K, -1, -2)))
        fit = fit_scale(probe.Q, probe.K, weights)
        assert fit is not None and fit.scale == pytest.approx(scale, rel=0.01)


@SETTINGS
@given(probe_sets, st.floats(0.02, 3.0).filter(lambda s: abs(s - 1.0) > 0.01))
def test_an_injected_constant_scale_is_named_with_its_value(probes: list[Probe], scale: float) -> None:
    def constant(Q: np.ndarray, K: np.ndarray, V: np.ndarray) -> np.ndarray:
        return softmax(scale * (Q @ np.swapaxes(K, -1, -2))) @ V

    observed = {p.name: observe_probe(p, constant) for p in probes}
    found = name_mistakes({p.name: p for p in probes}, observed, TOLERANCE)
    assert [d.name for d in found] == ["scale-constant"]
    assert found[0].evidence["fitted_scale"] == pytest.approx(scale, rel=0.01)


# -- correct implementations stay clean ---------------------------------------------------------


def _einsum(Q: np.ndarray, K: np.ndarray, V: np.ndarray) -> np.ndarray:
    s = np.einsum("...qd,...kd->...qk", Q, K) / np.sqrt(Q.shape[-1])
    return np.einsum("...qk,...kv->...qv", softmax(s), V)


def _loops(Q: np.ndarray, K: np.ndarray, V: np.ndarray) -> np.ndarray:
    if Q.ndim > 2:
        return np.stack([_loops(q, k, v) for q, k, v in zip(Q, K, V)])
    s = Q @ K.T / np.sqrt(Q.shape[1])
    return softmax(s, axis=1) @ V


def _float32(Q: np.ndarray, K: np.ndarray, V: np.ndarray) -> np.ndarray:
    return REFERENCE(Q.astype(np.float32), K.astype(np.float32), V.astype(np.float32)).astype(np.float32)


def _prescale_keys(Q: np.ndarray, K: np.ndarray, V: np.ndarray) -> np.ndarray:
    K = K / np.sqrt(K.shape[-1])
    return softmax(Q @ np.moveaxis(K, -1, -2)) @ V


def _log_softmax(Q: np.ndarray, K: np.ndarray, V: np.ndarray) -> np.ndarray:
    s = np.matmul(Q, np.swapaxes(K, -2, -1)) * Q.shape[-1] ** -0.5
    m = s.max(axis=-1, keepdims=True)
    return np.exp(s - m - np.log(np.exp(s - m).sum(axis=-1, keepdims=True))) @ V


CORRECT = {"einsum": _einsum, "loops": _loops, "float32": _float32, "prescale-keys": _prescale_keys, "log-softmax": _log_softmax}


@SETTINGS
@given(probe_sets, st.sampled_from(sorted(CORRECT)))
def test_correct_implementations_stay_clean(probes: list[Probe], style: str) -> None:
    assert names_for(probes, CORRECT[style]) == []


# -- every mutant is named exactly --------------------------------------------------------------

MUTANTS = [v for v in all_variants() if 1 <= len(v.deviations) <= 3]


# Derandomized: random probe shapes can make two mistakes give the very same results (1/K.ndim
# and 1/T_k agree on single sequences of two keys where the batches raise), and a search for such a draw
# would make the suite fail at random. The same examples run every time.
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True, database=None)
@given(st.integers(0, 2**32 - 1), st.integers(0, len(MUTANTS) - 1))
def test_each_catalogue_mutant_is_named_exactly(seed: int, index: int) -> None:
    mutant, probes = MUTANTS[index], make_probes(seed)
    note(f"mutant: {mutant.label()} [{' | '.join(o.name for o in mutant.deviations)}]")
    assert sorted(names_for(probes, mutant)) == sorted(named_mistakes(mutant, probes))
