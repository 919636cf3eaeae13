"""The diagnosis engine as a pure function: hand-made observations in, diagnoses out.

No worker runs here: observations are built from the catalogue's own variants, so each test says
exactly what the submission did and what must be concluded from it.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import pytest

from grader.api import Prepared
from grader.checks import run_checks
from grader.diagnosis.catalogue import KEYS, REFERENCE, SCALE, Variant
from grader.diagnosis.engine import diagnose
from grader.observation import CapturedOutput, ErrorInfo, LoadInfo, Observation, Value, WorkerRun

Impl = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]


def observe(prepared: Prepared, impl: Impl, status: str = "completed") -> WorkerRun:
    observations = {}
    for probe in prepared.probes:
        try:
            out = impl(probe.Q.copy(), probe.K.copy(), probe.V.copy())
            obs = Observation(probe.name, 0, "returned", 0.0, value=Value("numpy.ndarray", array=np.asarray(out)))
        except Exception as exc:
            obs = Observation(probe.name, 0, "raised", 0.0, error=ErrorInfo(type(exc).__name__, str(exc), line=3))
        observations[(probe.name, 0)] = obs
    return WorkerRun(status, LoadInfo(ok=True, callable_type="function", signature="(Q, K, V)"), observations, CapturedOutput("", 0, 0), 0.1)  # type: ignore[arg-type]


def names(prepared: Prepared, run: WorkerRun) -> list[str]:
    checks = run_checks(prepared.suite, prepared.refs, run)
    return [d.name for d in diagnose(prepared.suite, prepared.probes, run, checks)]


def variant(scale: int, keys: int) -> Variant:
    return Variant((SCALE.options[scale], KEYS.options[keys]))


@pytest.mark.parametrize(
    ("scale", "keys", "expected"),
    [
        (0, 0, []),
        (1, 0, ["scale-by-dk"]),
        (2, 0, ["scale-missing"]),
        (0, 1, ["batch-transpose"]),
        (1, 1, ["scale-by-dk", "batch-transpose"]),
        (2, 1, ["scale-missing", "batch-transpose"]),
    ],
)
def test_each_catalogue_variant_is_named_exactly(prepared: Prepared, scale: int, keys: int, expected: list[str]) -> None:
    assert names(prepared, observe(prepared, variant(scale, keys))) == expected


def test_float32_reference_is_clean(prepared: Prepared) -> None:
    def f32(Q: np.ndarray, K: np.ndarray, V: np.ndarray) -> np.ndarray:
        return REFERENCE(Q.astype(np.float32), K.astype(np.float32), V.astype(np.float32)).astype(np.float32)

    assert names(prepared, observe(prepared, f32)) == []


def test_unknown_wrong_values_are_a_values_mismatch_with_numbers(prepared: Prepared) -> None:
    run = observe(prepared, lambda Q, K, V: REFERENCE(Q, K, V) + 0.01)
    checks = run_checks(prepared.suite, prepared.refs, run)
    diagnoses = diagnose(prepared.suite, prepared.probes, run, checks)
    assert [d.name for d in diagnoses] == ["values-mismatch"]
    assert diagnoses[0].evidence["max_abs_diff"] == pytest.approx(0.01, rel=1e-3)


def test_raising_everywhere_is_a_crash_with_its_exception(prepared: Prepared) -> None:
    def broken(Q: np.ndarray, K: np.ndarray, V: np.ndarray) -> np.ndarray:
        raise KeyError("boom")

    run = observe(prepared, broken)
    checks = run_checks(prepared.suite, prepared.refs, run)
    (d,) = diagnose(prepared.suite, prepared.probes, run, checks)
    assert d.name == "crash" and d.evidence["exception"] == "KeyError" and d.evidence["line"] == 3


def test_timeout_with_partial_observations(prepared: Prepared) -> None:
    run = observe(prepared, REFERENCE)
    partial = dict(list(run.observations.items())[:3])
    stopped = WorkerRun("timeout", run.load, partial, run.output, 10.0, detail="no result within 10 s", last_probe=prepared.probes[3].name)
    result = names(prepared, stopped)
    assert result == ["timeout"]


def test_wrong_shape_without_explanation_is_bad_return(prepared: Prepared) -> None:
    assert names(prepared, observe(prepared, lambda Q, K, V: REFERENCE(Q, K, V).reshape(-1))) == ["bad-return"]


def test_load_failures(prepared: Prepared) -> None:
    missing = WorkerRun("completed", LoadInfo(ok=False, reason="function-missing", available=("attn",)), {}, CapturedOutput("", 0, 0), 0.1)
    assert names(prepared, missing) == ["function-missing"]
    broken = WorkerRun("completed", LoadInfo(ok=False, reason="load-error", error=ErrorInfo("SyntaxError", "bad", 4)), {}, CapturedOutput("", 0, 0), 0.1)
    assert names(prepared, broken) == ["load-error"]
    wrong_arity = WorkerRun("completed", LoadInfo(ok=True, signature="(Q, K)", accepts_three=False, signature_error="too many"), {}, CapturedOutput("", 0, 0), 0.1)
    assert names(prepared, wrong_arity) == ["function-missing"]
