"""Probes and the checks that read them: fresh cases, repeats, returned inputs, large inputs."""

from __future__ import annotations

import numpy as np
import pytest

from grader.api import Prepared
from grader.checks import run_checks
from grader.diagnosis.catalogue import REFERENCE, Variant, all_variants
from grader.errors import SuiteError
from grader.probes import FRESH_DK, FRESH_SIZES, build_probes, fresh_probes
from grader.refdata import GRID
from grader.suite import parse_suite
from observing import observe


def test_fresh_cases_differ_on_every_run(prepared: Prepared) -> None:
    a = [p for p in build_probes(prepared.suite, prepared.refs) if p.fresh]
    b = [p for p in build_probes(prepared.suite, prepared.refs) if p.fresh]
    assert len(a) == len(b) == 7  # three shapes, values and identity, and a second call of one
    assert not any(x.Q.shape == y.Q.shape and np.array_equal(x.Q, y.Q) for x, y in zip(a, b))


def test_fresh_shapes_keep_every_size_apart() -> None:
    for seed in range(50):
        for probe in fresh_probes(seed):
            sizes = [*probe.Q.shape[:-2], probe.Q.shape[-2], probe.K.shape[-2], probe.Q.shape[-1], probe.V.shape[-1]]
            if probe.kind == "values":
                assert len(set(sizes)) == len(sizes)
    assert [p.Q.ndim for p in fresh_probes(1) if p.kind == "values"] == [2, 3, 4, 3]


def test_the_last_fresh_case_calls_an_earlier_ones_shapes_with_new_values() -> None:
    """A result kept between calls of the same shapes (a cache keyed on them) shows only there."""
    probes = fresh_probes(3)
    *_, last = probes
    (twin,) = [p for p in probes[:-1] if p.kind == "values" and p.Q.shape == last.Q.shape]
    assert (twin.K.shape, twin.V.shape) == (last.K.shape, last.V.shape)
    assert not np.array_equal(twin.Q, last.Q) and not np.array_equal(twin.V, last.V)
    assert [p.Q.ndim for p in fresh_probes(3, batched=False) if p.kind == "values"] == [2, 2]


def test_fresh_values_follow_the_seed_and_lie_on_the_stored_grid() -> None:
    def arrays(seed: int) -> list[np.ndarray]:
        return [a for p in fresh_probes(seed) for a in (p.Q, p.K, p.V)]

    assert all(np.array_equal(x, y) for x, y in zip(arrays(7), arrays(7)))
    assert not all(x.shape == y.shape and np.array_equal(x, y) for x, y in zip(arrays(7), arrays(8)))
    for seed in range(20):
        for probe in fresh_probes(seed):
            for array in (probe.Q, probe.K, probe.V):
                assert np.isfinite(array).all() and np.array_equal(np.round(array * GRID) / GRID, array)
    values = np.concatenate([p.Q.ravel() for seed in range(200) for p in fresh_probes(seed) if p.kind == "values"])
    assert abs(values.mean()) < 0.05 and abs(values.std() - 1) < 0.05  # standard normal, rounded


def test_fresh_sizes_cover_their_ranges() -> None:
    values = [p for seed in range(300) for p in fresh_probes(seed) if p.kind == "values"]
    batches = {n for p in values for n in p.Q.shape[:-2]}
    sizes = {n for p in values for n in (p.Q.shape[-2], p.K.shape[-2], p.V.shape[-1])}
    key_sizes = {p.Q.shape[-1] for p in values}
    assert batches == {2, 3, 4}
    assert sizes == set(range(FRESH_SIZES[0], FRESH_SIZES[1] + 1))
    assert min(key_sizes) == FRESH_DK[0] and max(key_sizes) == FRESH_DK[1]


def test_probes_asked_by_several_checks_carry_every_request(prepared: Prepared) -> None:
    by_name = {p.name: p for p in prepared.probes}
    assert by_name["head64/values"].repeat == 2 and by_name["cross/values"].repeat == 2
    assert by_name["single/values"].return_inputs and by_name["multihead/values"].return_inputs
    assert by_name["large/values"].magnitude == 64
    assert len(by_name) == len(prepared.probes)


def outcomes(prepared: Prepared, impl) -> dict[str, str]:  # type: ignore[no-untyped-def]
    run = observe(prepared.probes, impl)  # a NumPy submission's: no gradients check
    return {c.id: c.outcome for c in run_checks(prepared.suite.for_framework("numpy"), prepared.refs, run, prepared.probes)}


def variant(*mistakes: str) -> Variant:
    return next(v for v in all_variants() if sorted(v.diagnoses) == sorted(mistakes))


def test_each_new_check_fails_its_mistake_and_passes_the_reference(prepared: Prepared) -> None:
    def mutating(Q: np.ndarray, K: np.ndarray, V: np.ndarray) -> np.ndarray:
        out = REFERENCE(Q, K, V)
        V *= 2
        return out

    rng = np.random.default_rng(0)

    def noisy(Q: np.ndarray, K: np.ndarray, V: np.ndarray) -> np.ndarray:
        return REFERENCE(Q, K, V) + rng.normal(0, 1e-2, (*Q.shape[:-1], V.shape[-1]))

    assert all(o == "passed" for o in outcomes(prepared, REFERENCE).values())
    assert outcomes(prepared, variant("softmax-unstable"))["stability"] == "failed"
    assert outcomes(prepared, mutating)["mutation"] == "failed"
    assert outcomes(prepared, noisy)["determinism"] == "failed"
    assert outcomes(prepared, variant("scale-by-dv"))["cross"] == "failed"
    assert outcomes(prepared, variant("scale-by-dk"))["fresh"] == "failed"


def test_stability_accepts_float32_on_large_inputs(prepared: Prepared) -> None:
    def f32(Q: np.ndarray, K: np.ndarray, V: np.ndarray) -> np.ndarray:
        return REFERENCE(Q.astype(np.float32), K.astype(np.float32), V.astype(np.float32))

    assert outcomes(prepared, f32)["stability"] == "passed"


BASE = "version: 1\nname: x\ncases:\n  a: {seed: 1, shape: {tq: 2, tk: 3, dk: 4, dv: 5}}\n  s: {seed: 2, shape: {tq: 3, tk: 3, dk: 4, dv: 4}}\n"


@pytest.mark.parametrize(
    ("tail", "expected"),
    [
        ("checks: [{id: load}, {id: c, kind: cross, case: s}]\n", "needs T_q != T_k and d_k != d_v"),
        ("checks: [{id: load}, {id: f, kind: fresh, case: a}]\n", "give it no cases"),
        ("checks: [{id: load}, {id: m, kind: mutation}]\n", "needs 'case' or 'cases'"),
    ],
)
def test_new_check_kinds_are_validated(tail: str, expected: str) -> None:
    with pytest.raises(SuiteError, match=expected):
        parse_suite(BASE + tail, "s.yaml")


def test_magnitude_must_be_a_power_of_two() -> None:
    text = "version: 1\nname: x\ncases:\n  a: {seed: 1, magnitude: 3, shape: {tq: 2, tk: 3, dk: 4, dv: 5}}\nchecks: [{id: load}]\n"
    with pytest.raises(SuiteError, match="s.yaml:4: cases.a.magnitude: expected a power of two"):
        parse_suite(text, "s.yaml")
    assert parse_suite(text.replace("magnitude: 3", "magnitude: 64"), "s.yaml").cases["a"].magnitude == 64
