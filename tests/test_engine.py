"""The diagnosis engine as a pure function: hand-made observations in, diagnoses out.

No worker runs here: observations are built from the catalogue's own variants (or small
implementations written here), so each test says exactly what the submission did and what must
be concluded from it.
"""

from __future__ import annotations

import numpy as np
import pytest

from grader.api import Prepared
from grader.checks import run_checks
from grader.diagnosis.catalogue import REFERENCE, Variant, all_variants, tier
from grader.diagnosis.engine import diagnose
from grader.diagnosis.model import Diagnosis
from grader.observation import CapturedOutput, ErrorInfo, LoadInfo, WorkerRun
from observing import Impl, observe, named_mistakes


def run_engine(prepared: Prepared, run: WorkerRun) -> list[Diagnosis]:
    suite = prepared.suite.for_framework("numpy")  # the hand-made observations are a NumPy submission's
    checks = run_checks(suite, prepared.refs, run, prepared.probes)
    return diagnose(suite, prepared.probes, run, checks)


def names(prepared: Prepared, impl: Impl) -> list[str]:
    return [d.name for d in run_engine(prepared, observe(prepared.probes, impl))]


def errors(prepared: Prepared, impl: Impl) -> list[str]:
    return sorted(d.name for d in run_engine(prepared, observe(prepared.probes, impl)) if d.severity == "error")


# Every variant with at most two mistakes is named exactly: its mistakes and nothing else.
TWO_OR_FEWER = [v for v in all_variants() if len(v.deviations) <= 2]


@pytest.mark.parametrize("variant", TWO_OR_FEWER, ids=[f"{v.label()}[{'|'.join(o.name for o in v.deviations)}]" for v in TWO_OR_FEWER])
def test_each_catalogue_variant_is_named_exactly(prepared: Prepared, variant: Variant) -> None:
    assert errors(prepared, variant) == sorted(named_mistakes(variant, prepared.probes))


# Every variant with four mistakes (the common ones: see catalogue.MOST_MISTAKES) is named exactly too.
FOUR = list(tier(4))


@pytest.mark.parametrize("variant", FOUR, ids=[f"{v.label()}[{'|'.join(o.name for o in v.deviations)}]" for v in FOUR])
def test_each_variant_with_four_mistakes_is_named_exactly(prepared: Prepared, variant: Variant) -> None:
    assert errors(prepared, variant) == sorted(named_mistakes(variant, prepared.probes))


def test_four_mistakes_need_every_smaller_combination_in_the_catalogue() -> None:
    """A variant of four is tried only after every variant of three: each three of its mistakes
    must be a variant too, or a group explained by three would pick a fourth nothing shows."""
    three = {frozenset(v.deviations) for v in tier(3)}
    for variant in FOUR:
        for left_out in variant.deviations:
            assert frozenset(o for o in variant.deviations if o is not left_out) in three, variant.label()


def _half(Q: np.ndarray, K: np.ndarray, V: np.ndarray) -> np.ndarray:
    q, k, v = (x.astype(np.float16) for x in (Q, K, V))
    s = q @ np.swapaxes(k, -1, -2) / np.float16(np.sqrt(Q.shape[-1]))
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True) @ v


def test_half_precision_beyond_the_tolerance_is_the_failing_reduced_precision(prepared: Prepared) -> None:
    run = observe(prepared.probes, _half)
    found = run_engine(prepared, run)
    assert [(d.name, d.severity) for d in found] == [("reduced-precision", "error")]
    d = found[0]
    assert d.evidence["dtype"] == ["float16"] and d.evidence["probes_beyond_tolerance"] > 0
    assert 0 < d.evidence["epsilon_units"] <= 8 and "float16" in d.message and ".half()" in d.fix
    failed = {c.id for c in run_checks(prepared.suite.for_framework("numpy"), prepared.refs, run, prepared.probes) if c.outcome == "failed"}
    assert failed and set(d.checks) == failed  # it explains every failed check


def test_half_precision_widened_to_float64_is_named_from_the_float16_grid(prepared: Prepared) -> None:
    found = run_engine(prepared, observe(prepared.probes, lambda Q, K, V: _half(Q, K, V).astype(np.float64)))
    assert [(d.name, d.severity) for d in found] == [("reduced-precision", "error")]
    assert found[0].evidence["dtype"] == ["float64"] and "float16 grid" in found[0].message


@pytest.mark.parametrize(
    "change",
    [
        lambda out: out + 1e-3,  # an offset as small as float16 rounding, of one sign
        lambda out: out * (1 - 1e-3),  # a steady factor, as an epsilon in a denominator gives
        lambda out: out + 1e-2 * np.sin(np.arange(out.size).reshape(out.shape)),  # both signs, too large
    ],
    ids=["offset", "factor", "too-large"],
)
def test_small_float64_differences_no_rounding_explains_stay_a_values_mismatch(prepared: Prepared, change: Impl) -> None:
    found = run_engine(prepared, observe(prepared.probes, lambda Q, K, V: change(REFERENCE(Q, K, V))))
    assert [d.name for d in found] == ["values-mismatch"]


def test_an_integer_result_is_truncation_never_reduced_precision(prepared: Prepared) -> None:
    for dtype in (np.int64, np.int32, np.int16):
        found = run_engine(prepared, observe(prepared.probes, lambda Q, K, V: REFERENCE(Q, K, V).astype(dtype)))
        assert [d.name for d in found] == ["integer-truncation"], dtype
        assert f"returns {np.dtype(dtype).name} arrays" in found[0].message


def test_float32_reference_is_at_most_a_warning(prepared: Prepared) -> None:
    def f32(Q: np.ndarray, K: np.ndarray, V: np.ndarray) -> np.ndarray:
        return REFERENCE(Q.astype(np.float32), K.astype(np.float32), V.astype(np.float32)).astype(np.float32)

    assert names(prepared, f32) == ["reduced-precision"]


def test_exact_reference_is_clean(prepared: Prepared) -> None:
    assert names(prepared, REFERENCE) == []


def test_unknown_wrong_values_are_a_values_mismatch_with_numbers(prepared: Prepared) -> None:
    diagnoses = run_engine(prepared, observe(prepared.probes, lambda Q, K, V: REFERENCE(Q, K, V) + 0.01))
    assert [d.name for d in diagnoses] == ["values-mismatch"]
    assert diagnoses[0].evidence["max_abs_diff"] == pytest.approx(0.01, rel=1e-3)


def test_raising_everywhere_is_a_crash_with_its_exception(prepared: Prepared) -> None:
    def broken(Q: np.ndarray, K: np.ndarray, V: np.ndarray) -> np.ndarray:
        raise KeyError("boom")

    (d,) = run_engine(prepared, observe(prepared.probes, broken))
    assert d.name == "crash" and d.evidence["exception"] == "KeyError" and d.evidence["line"] == 3
    assert "Q(" in d.message  # the input shape that raised


def test_a_3d_only_transpose_is_a_crash_that_names_the_ranks(prepared: Prepared) -> None:
    def three_d_only(Q: np.ndarray, K: np.ndarray, V: np.ndarray) -> np.ndarray:
        return REFERENCE.finish(REFERENCE.weights(Q, K.transpose(0, 2, 1).transpose(0, 2, 1), V), V)

    (d,) = run_engine(prepared, observe(prepared.probes, three_d_only))
    assert d.name == "crash"
    assert "raises on 2-D, 4-D input, runs on 3-D input" in d.message


def test_timeout_with_partial_observations(prepared: Prepared) -> None:
    run = observe(prepared.probes, REFERENCE)
    partial = dict(list(run.observations.items())[:3])
    stopped = WorkerRun("timeout", run.load, partial, run.output, 10.0, detail="no result within 10 s", last_probe=prepared.probes[3].name)
    assert [d.name for d in run_engine(prepared, stopped)] == ["timeout"]


def test_wrong_shape_without_explanation_is_bad_return(prepared: Prepared) -> None:
    assert names(prepared, lambda Q, K, V: REFERENCE(Q, K, V).reshape(-1)) == ["bad-return"]


def test_load_failures(prepared: Prepared) -> None:
    missing = WorkerRun("completed", LoadInfo(ok=False, reason="function-missing", available=("attn",)), {}, CapturedOutput("", 0, 0), 0.1)
    assert [d.name for d in run_engine(prepared, missing)] == ["function-missing"]
    broken = WorkerRun("completed", LoadInfo(ok=False, reason="load-error", error=ErrorInfo("SyntaxError", "bad", 4)), {}, CapturedOutput("", 0, 0), 0.1)
    assert [d.name for d in run_engine(prepared, broken)] == ["load-error"]
    wrong_arity = WorkerRun("completed", LoadInfo(ok=True, signature="(Q, K)", accepts_three=False, signature_error="too many"), {}, CapturedOutput("", 0, 0), 0.1)
    assert [d.name for d in run_engine(prepared, wrong_arity)] == ["function-missing"]


# -- mistakes the catalogue cannot replay -------------------------------------------------------


def test_in_place_scaling_is_input_mutated_with_the_factor(prepared: Prepared) -> None:
    def scales_q(Q: np.ndarray, K: np.ndarray, V: np.ndarray) -> np.ndarray:
        Q /= np.sqrt(Q.shape[-1])
        return REFERENCE.finish(REFERENCE.weights(Q * np.sqrt(Q.shape[-1]), K, V), V)

    (d,) = run_engine(prepared, observe(prepared.probes, scales_q))
    assert d.name == "input-mutated"
    assert d.evidence["array"] == "Q"
    assert d.evidence["factor"] == pytest.approx(0.5)  # single: d_k = 4


def test_random_noise_is_nondeterministic_not_a_values_mismatch(prepared: Prepared) -> None:
    rng = np.random.default_rng(0)

    def dropout(Q: np.ndarray, K: np.ndarray, V: np.ndarray) -> np.ndarray:
        w = REFERENCE.weights(Q, K, V)
        return (w * (rng.random(w.shape) > 0.1) / 0.9) @ V

    assert errors(prepared, dropout) == ["nondeterministic"]


def test_right_on_stored_cases_wrong_on_fresh_ones_is_hardcoded(prepared: Prepared) -> None:
    stored = {(p.Q.tobytes(), p.V.tobytes()): REFERENCE(p.Q, p.K, p.V) for p in prepared.probes if not p.fresh}

    def replay(Q: np.ndarray, K: np.ndarray, V: np.ndarray) -> np.ndarray:
        known = stored.get((Q.tobytes(), V.tobytes()))
        return known if known is not None else np.zeros((*Q.shape[:-1], V.shape[-1]))

    found = run_engine(prepared, observe(prepared.probes, replay))
    assert [d.name for d in found] == ["hardcoded"]
    assert found[0].evidence["stored_probes"] >= 15 and found[0].evidence["fresh_failing"] >= 1


def test_a_constant_scale_reports_the_same_fit_at_every_head_size(prepared: Prepared) -> None:
    def eighth(Q: np.ndarray, K: np.ndarray, V: np.ndarray) -> np.ndarray:
        from grader.attention import softmax

        return softmax(Q @ np.swapaxes(K, -1, -2) / 8.0) @ V

    (d,) = run_engine(prepared, observe(prepared.probes, eighth))
    assert d.name == "scale-constant"
    fits = [p["scale"] for p in d.evidence["fitted_scales"]]
    assert len({p["d_k"] for p in d.evidence["fitted_scales"]}) >= 3
    assert all(f == pytest.approx(0.125, rel=1e-3) for f in fits)


def test_a_fourth_root_is_scale_other_with_its_formula(prepared: Prepared) -> None:
    def fourth_root(Q: np.ndarray, K: np.ndarray, V: np.ndarray) -> np.ndarray:
        from grader.attention import softmax

        return softmax(Q @ np.swapaxes(K, -1, -2) / Q.shape[-1] ** 0.25) @ V

    (d,) = run_engine(prepared, observe(prepared.probes, fourth_root))
    assert d.name == "scale-other"
    assert d.evidence["formula"] == "d_k^-1/4"


# -- the softmax and dtype mistakes, with their figures -------------------------------------------


def test_zeros_everywhere_stay_a_values_mismatch(prepared: Prepared) -> None:
    # Weights cut to integers are nearly all 0; a submission that returns only zeros must still
    # not be taken for one of those variants.
    assert errors(prepared, lambda Q, K, V: np.zeros((*Q.shape[:-1], V.shape[-1]))) == ["values-mismatch"]


def test_a_scale_after_the_softmax_shows_in_the_row_sums(prepared: Prepared) -> None:
    from grader.attention import softmax

    (d,) = run_engine(prepared, observe(prepared.probes, lambda Q, K, V: softmax(Q @ np.swapaxes(K, -1, -2)) / np.sqrt(Q.shape[-1]) @ V))
    assert d.name == "scale-after-softmax"
    assert d.evidence["row_sum_min"] == pytest.approx(d.evidence["factor"]) == pytest.approx(d.evidence["d_k"] ** -0.5)


def test_an_unasked_causal_mask_counts_the_zeros_above_the_diagonal(prepared: Prepared) -> None:
    from grader.attention import softmax

    def causal(Q: np.ndarray, K: np.ndarray, V: np.ndarray) -> np.ndarray:
        s = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])
        return softmax(np.where(np.tril(np.ones(s.shape[-2:], dtype=bool)), s, -np.inf)) @ V

    (d,) = run_engine(prepared, observe(prepared.probes, causal))
    assert d.name == "mask-unasked"
    assert d.evidence["zero_above_diagonal"] == d.evidence["above_diagonal"] > 0


@pytest.mark.parametrize(("impl", "want"), [
    (lambda Q, K, V: np.exp(Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1]) - (Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])).max(axis=-1, keepdims=True)) @ V, "softmax-unnormalised"),
    (lambda Q, K, V: np.log(REFERENCE.weights(Q, K, V)) @ V, "softmax-log"),
    (lambda Q, K, V: REFERENCE(Q, K, V).astype(np.int64), "integer-truncation"),
], ids=["unnormalised", "log", "int-output"])
def test_the_softmax_and_dtype_mistakes_are_named_alone(prepared: Prepared, impl: Impl, want: str) -> None:
    assert errors(prepared, impl) == [want]


def test_quoted_exception_text_is_cut_at_a_word_boundary() -> None:
    from grader.diagnosis.describe import clip

    text = "matmul: Input operand 1 has a mismatch in its core dimension 0, with gufunc signature (n?,k),(k,m?)->(n?,m?) (size 5 is different from 4)"
    cut = clip(text, 60)
    assert cut.endswith("...") and len(cut) <= 60
    assert text.startswith(cut[:-3]) and text[len(cut) - 3] == " "


def test_an_epsilon_in_the_denominator_is_no_reduced_precision(prepared: Prepared) -> None:
    def eps(Q: np.ndarray, K: np.ndarray, V: np.ndarray) -> np.ndarray:
        s = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])
        e = np.exp(s - s.max(axis=-1, keepdims=True))
        return (e / (e.sum(axis=-1, keepdims=True) + 1e-9)) @ V

    assert names(prepared, eps) == []


def test_a_rank_dependent_axis_is_one_mistake_with_per_rank_evidence(prepared: Prepared) -> None:
    def axis2(Q: np.ndarray, K: np.ndarray, V: np.ndarray) -> np.ndarray:
        s = np.matmul(Q, np.swapaxes(K, -1, -2)) / np.sqrt(Q.shape[-1])
        e = np.exp(s - s.max(axis=2, keepdims=True))
        return (e / e.sum(axis=2, keepdims=True)) @ V

    found = [d for d in run_engine(prepared, observe(prepared.probes, axis2)) if d.severity == "error"]
    assert [d.name for d in found] == ["softmax-wrong-axis"]
    assert found[0].evidence["ranks"] == {"2-D": "raises", "3-D": "right", "4-D": "wrong"}


def test_code_for_one_sequence_is_named_for_the_batch_only(prepared: Prepared) -> None:
    def single(Q: np.ndarray, K: np.ndarray, V: np.ndarray) -> np.ndarray:
        s = Q @ K.T / np.sqrt(K.shape[-1])
        e = np.exp(s - s.max(axis=1, keepdims=True))
        return (e / e.sum(axis=1, keepdims=True)) @ V

    found = [d for d in run_engine(prepared, observe(prepared.probes, single)) if d.severity == "error"]
    assert [d.name for d in found] == ["batch-transpose"]
    assert found[0].evidence["written_for_one_rank"] == ["axis 1"]


def _three_d_only(scale: float | None) -> Impl:
    """Attention written for (B, T, d) only: transpose(0, 2, 1) raises on 2-D and 4-D input.
    ``scale``: the power of d_k the scores are multiplied by (None: no scale)."""

    def impl(Q: np.ndarray, K: np.ndarray, V: np.ndarray) -> np.ndarray:
        s = np.matmul(Q, K.transpose(0, 2, 1))
        if scale is not None:
            s = s * Q.shape[-1] ** scale
        e = np.exp(s - s.max(axis=-1, keepdims=True))
        return (e / e.sum(axis=-1, keepdims=True)) @ V

    return impl


@pytest.mark.parametrize(("scale", "want"), [(-1.0, "scale-by-dk"), (None, "scale-missing")], ids=["by-dk", "missing"])
def test_code_for_one_rank_that_is_also_wrong_there_gets_both_names(prepared: Prepared, scale: float | None, want: str) -> None:
    found = [d for d in run_engine(prepared, observe(prepared.probes, _three_d_only(scale))) if d.severity == "error"]
    assert [d.name for d in found] == ["crash", want]
    crash, mistake = found
    assert "raises on 2-D, 4-D input, runs on 3-D input" in crash.message
    assert crash.evidence["raises_on_ranks"] == [2, 4] and crash.evidence["runs_on_ranks"] == [3]
    # Named from the 3-D probes alone, with the verdict on every rank.
    assert mistake.evidence["ranks"] == {"2-D": "raises", "3-D": "wrong", "4-D": "raises"}
    by_name = {p.name: p for p in prepared.probes}
    assert {by_name[n].Q.ndim for n in mistake.evidence["named_from"]} == {3}
    assert "named from the 3-D probes" in mistake.message


def test_code_for_one_rank_that_is_right_there_is_a_crash_alone(prepared: Prepared) -> None:
    assert errors(prepared, _three_d_only(-0.5)) == ["crash"]


def test_ranks_that_both_raise_and_run_are_no_rank_split(prepared: Prepared) -> None:
    # Raising on some 3-D probes only (by their size, not their rank): the catalogue is not asked
    # to explain part of a rank, so the crash stays the only name.
    def by_size(Q: np.ndarray, K: np.ndarray, V: np.ndarray) -> np.ndarray:
        if Q.ndim != 3 or Q.shape[-2] != K.shape[-2]:
            raise ValueError("square scores only")
        return _three_d_only(-1.0)(Q, K, V)

    assert errors(prepared, by_size) == ["crash"]


def _missing_fix(prepared: Prepared, available: tuple[str, ...]) -> Diagnosis:
    run = WorkerRun("completed", LoadInfo(ok=False, reason="function-missing", available=available), {}, CapturedOutput("", 0, 0), 0.1)
    (d,) = run_engine(prepared, run)
    assert d.name == "function-missing"
    return d


def test_the_attention_under_another_name_is_named_in_the_fix(prepared: Prepared) -> None:
    d = _missing_fix(prepared, ("scaled_dot_product_attention", "softmax"))
    assert "--function scaled_dot_product_attention" in d.fix and "function: scaled_dot_product_attention" in d.fix
    assert d.evidence["candidate"] == "scaled_dot_product_attention"
    assert "`--function multi_head_attn`" in _missing_fix(prepared, ("multi_head_attn", "helper")).fix  # "attn" too
    # A class (CapWords, an nn.Module) is never offered: called with (Q, K, V) it would construct one.
    assert _missing_fix(prepared, ("ScaledDotProductAttention",)).fix == GENERIC_FIX
    assert "`--function attn_forward`" in _missing_fix(prepared, ("MultiHeadAttention", "attn_forward")).fix


GENERIC_FIX = "Define `def attention(Q, K, V):` at the top level of the file (or grade another name with --function)."


@pytest.mark.parametrize(
    "available",
    [
        ("attention_naive", "attention_fast"),  # two candidates: the message lists both, the fix stays generic
        ("softmax", "helper"),  # none
        ("attn::error::boom\x1b[2J",),  # not an identifier: never in a command
        ("my attention`; rm -rf ~",),
        ("attention_" + "x" * 90,),  # may have been cut at 100 characters by the observation
    ],
    ids=["two-candidates", "none", "workflow-command", "shell", "cut-name"],
)
def test_no_single_plain_candidate_keeps_the_generic_fix(prepared: Prepared, available: tuple[str, ...]) -> None:
    d = _missing_fix(prepared, available)
    assert d.fix == GENERIC_FIX and "candidate" not in d.evidence


@pytest.mark.parametrize(
    ("error_type", "message", "module"),
    [
        ("ModuleNotFoundError", "No module named 'matplotlib'", "matplotlib"),
        ("ModuleNotFoundError", "No module named 'matplotlib.pyplot'", "matplotlib"),
        ("ImportError", "No module named 'my_softmax_utils'", "my_softmax_utils"),
        ("ImportError", "cannot import name 'softmax' from 'scipy'", None),
        ("ModuleNotFoundError", "No module named 'x'; echo pwned", None),  # the submission's text: only a plain name
        ("ModuleNotFoundError", "No module named '\x1b[2Jx'", None),
        ("ValueError", "No module named 'numpy'", None),
    ],
)
def test_the_missing_module_of_a_load_error_is_read_strictly(error_type: str, message: str, module: str | None) -> None:
    from grader.diagnosis.engine import missing_module

    assert missing_module(error_type, message) == module
