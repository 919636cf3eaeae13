"""What a submission returns beside its output: the pair split (grader.returns), the mistakes of
the returned weights named (grader.diagnosis.returned_weights), a None in the weights' place, and
the bad-return fix in the submission's own framework. The corpus table is
tests/corpus/returns/expected.yaml; the rest are hand-made observations (tests/observing.py)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import yaml

from conftest import CORPUS, assert_verdict, error_names, needs_framework
from grader.diagnosis.catalogue import REFERENCE
from grader.diagnosis.returned_weights import MARK, weights_diagnoses
from grader.observation import Observation, Value, WorkerRun
from grader.probes import Probe
from grader.returns import split_returns
from observing import observe

TABLE = CORPUS / "returns"
EXPECTED: dict[str, dict] = yaml.safe_load((TABLE / "expected.yaml").read_text())  # type: ignore[type-arg]


def _param(path: str, want: dict):  # type: ignore[no-untyped-def, type-arg]
    marks = [pytest.mark.framework] if want.get("requires") else []
    return pytest.param(path, want, id=path, marks=marks)


@pytest.mark.parametrize(("path", "want"), [_param(p, w) for p, w in sorted(EXPECTED.items())])
def test_return_is_judged_as_expected(path: str, want: dict, grade_path) -> None:  # type: ignore[no-untyped-def, type-arg]
    needs_framework(want.get("requires"))
    report = grade_path(TABLE / path)
    assert_verdict(report, want)
    if want["passed"]:
        assert report.score == report.max_score
    if "returns" in want:
        assert report.extra.get("returns") == want["returns"]
    errors = [d for d in report.diagnoses if d.severity == "error"]
    if "fix_has" in want:
        assert want["fix_has"] in errors[0].fix, errors[0].fix
    if "fix_lacks" in want:
        assert want["fix_lacks"] not in errors[0].fix, errors[0].fix


def test_every_returns_corpus_file_is_listed() -> None:
    assert {p.name for p in TABLE.glob("*.py")} == set(EXPECTED)


# -- the neighbours that keep their verdicts ---------------------------------------------------


def test_a_right_pair_passes_and_a_bare_weights_return_stays_returns_weights(grade_path) -> None:  # type: ignore[no-untyped-def]
    right = grade_path(CORPUS / "forms" / "tuple_output_weights.py")
    assert right.passed and right.diagnoses == () and right.extra["returns"] == "(output, weights)"
    bare = grade_path(CORPUS / "buggy" / "returns-weights.py")
    (d,) = bare.diagnoses
    assert d.name == "returns-weights" and d.fix == "return weights @ V" and "pair" not in d.evidence
    assert d.message.startswith("returns shape ")


def test_the_same_mistake_in_output_and_weights_is_named_once(grade_path) -> None:  # type: ignore[no-untyped-def]
    report = grade_path(CORPUS / "forms" / "tuple_seed_bugs.py")
    assert error_names(report) == ["batch-transpose", "scale-by-dk"]
    assert not any(d.evidence.get(MARK) for d in report.diagnoses)  # named from the output


def test_the_weights_mistake_says_it_is_in_the_weights(grade_path) -> None:  # type: ignore[no-untyped-def]
    report = grade_path(CORPUS / "forms" / "tuple_wrong_weights.py")
    (d,) = report.diagnoses
    assert d.name == "softmax-missing" and d.evidence[MARK] is True
    assert d.message.startswith("in the weights returned beside the output: ")
    assert d.fix.startswith("The output is right; the weights returned beside it are not.")
    # The output's checks pass; the failed ones are those that compare the returned weights.
    assert {c.id for c in report.checks if c.id == "outputs" and c.passed} == {"outputs"}


# -- the split, on hand-made observations ------------------------------------------------------


def _softmax(s: np.ndarray) -> np.ndarray:
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _arr(a: np.ndarray) -> Value:
    return Value("numpy.ndarray", array=a)


NONE = Value("NoneType", repr="None")


def _pairs(prepared, impl_items) -> tuple[WorkerRun, list[Probe]]:  # type: ignore[no-untyped-def]
    """A run whose every probe returned the tuple ``impl_items(Q, K, V)`` of Values."""
    probes = [p for p in prepared.probes if not p.gradients and p.mask is None]
    run = observe(probes, REFERENCE)
    by_name = {p.name: p for p in probes}
    observations = {key: replace(obs, value=Value("tuple", items=impl_items(by_name[key[0]]))) for key, obs in run.observations.items()}
    return replace(run, observations=observations), probes


def test_output_beside_none_is_the_output_alone_either_way(prepared) -> None:  # type: ignore[no-untyped-def]
    for items in (lambda p: (_arr(REFERENCE(p.Q, p.K, p.V)), NONE), lambda p: (NONE, _arr(REFERENCE(p.Q, p.K, p.V)))):
        run, probes = _pairs(prepared, items)
        split, order = split_returns(run, probes)
        assert order is None  # no "(output, weights)" claimed for a pair without weights
        for (name, _), obs in split.observations.items():
            p = next(q for q in probes if q.name == name)
            assert obs.value is not None and obs.value.weights is None
            assert obs.value.array is not None and np.allclose(obs.value.array, REFERENCE(p.Q, p.K, p.V))


def test_two_nones_or_a_none_beside_a_non_array_stay_as_returned(prepared) -> None:  # type: ignore[no-untyped-def]
    for items in (lambda p: (NONE, NONE), lambda p: (NONE, Value("str", repr="'done'"))):
        run, probes = _pairs(prepared, items)
        split, order = split_returns(run, probes)
        assert order is None and split.observations == run.observations


def test_an_object_named_like_none_is_not_taken_for_one_unless_builtins_says_so(prepared) -> None:  # type: ignore[no-untyped-def]
    # The worker names a class "module.Name"; only builtins' None is plain "NoneType".
    fake = Value("submission.NoneType", repr="None")
    run, probes = _pairs(prepared, lambda p: (_arr(REFERENCE(p.Q, p.K, p.V)), fake))
    split, _ = split_returns(run, probes)
    assert split.observations == run.observations


def test_two_weight_matrices_are_the_weights_in_the_outputs_place(prepared) -> None:  # type: ignore[no-untyped-def]
    run, probes = _pairs(prepared, lambda p: (_arr(REFERENCE.weights(p.Q, p.K, p.V)), _arr(REFERENCE.weights(p.Q, p.K, p.V))))
    split, order = split_returns(run, probes)
    assert order == "output-first"
    for (name, _), obs in split.observations.items():
        p = next(q for q in probes if q.name == name)
        assert obs.value is not None and obs.value.array is not None and obs.value.weights is not None
        assert obs.value.array.shape == REFERENCE.weights(p.Q, p.K, p.V).shape


# -- the returned weights' mistakes, as a pure function -----------------------------------------


def _observed_pairs(prepared, weights_of) -> tuple[dict[str, Probe], dict[str, Observation]]:  # type: ignore[no-untyped-def]
    probes = {p.name: p for p in prepared.probes if not p.gradients and p.mask is None}
    observed = {}
    for name, p in probes.items():
        value = Value("tuple", array=REFERENCE(p.Q, p.K, p.V), weights=weights_of(p))
        observed[name] = Observation(name, 0, "returned", 0.0, value=value)
    return probes, observed


def test_right_weights_give_no_diagnosis(prepared) -> None:  # type: ignore[no-untyped-def]
    probes, observed = _observed_pairs(prepared, lambda p: REFERENCE.weights(p.Q, p.K, p.V))
    assert weights_diagnoses(probes, observed, prepared.suite.tolerance, ()) == []


def test_raw_scores_as_the_weights_are_softmax_missing_there(prepared) -> None:  # type: ignore[no-untyped-def]
    probes, observed = _observed_pairs(prepared, lambda p: REFERENCE.scores(p.Q, p.K, p.V))
    (d,) = weights_diagnoses(probes, observed, prepared.suite.tolerance, ("weights",))
    assert d.name == "softmax-missing" and d.evidence[MARK] is True and d.checks == ("weights",)
    assert d.fix.startswith("The output is right")


def test_weights_of_another_scale_are_named_with_it(prepared) -> None:  # type: ignore[no-untyped-def]
    probes, observed = _observed_pairs(prepared, lambda p: _softmax(REFERENCE.scores(p.Q, p.K, p.V) / np.sqrt(p.Q.shape[-1])))
    (d,) = weights_diagnoses(probes, observed, prepared.suite.tolerance, ())
    assert d.name == "scale-by-dk" and d.message.startswith("in the weights returned beside the output: ")


def test_weights_nothing_explains_are_a_mismatch_of_the_weights(prepared) -> None:  # type: ignore[no-untyped-def]
    probes, observed = _observed_pairs(prepared, lambda p: np.sqrt(REFERENCE.weights(p.Q, p.K, p.V)))
    (d,) = weights_diagnoses(probes, observed, prepared.suite.tolerance, ())
    assert d.name == "values-mismatch" and d.message.startswith("the weights returned beside the output")
    assert "step by step" not in d.fix and d.evidence["mismatched"] > 0


def test_no_returned_weights_no_diagnosis(prepared) -> None:  # type: ignore[no-untyped-def]
    probes = {p.name: p for p in prepared.probes if not p.gradients and p.mask is None}
    observed = {n: Observation(n, 0, "returned", 0.0, value=_arr(REFERENCE(p.Q, p.K, p.V))) for n, p in probes.items()}
    assert weights_diagnoses(probes, observed, prepared.suite.tolerance, ()) == []
