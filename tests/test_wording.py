"""The right words for a mistake: a crash that two sizes decide, an in-place operation that breaks
the backward, bfloat16 compute, and which files a checkout's note names. The table is
tests/corpus/wording/expected.yaml; the look-alikes beside each keep their own words."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Callable

import numpy as np
import pytest
import yaml

from conftest import CORPUS, assert_verdict, needs_framework
from grader.api import Prepared
from grader.diagnosis.behaviour import to_bfloat16
from grader.diagnosis.inplace import in_place_statement, is_in_place_error, saved_by
from grader.diagnosis.locate_dtype import narrowing_call
from grader.diagnosis.model import Diagnosis
from grader.discover import Rule, defines_function, find_in_checkout
from grader.pipeline import grade_one
from grader.report.model import Report

WORDING = CORPUS / "wording"
TABLE: dict[str, dict] = yaml.safe_load((WORDING / "expected.yaml").read_text())  # type: ignore[type-arg]
EXAMPLES = Path(__file__).resolve().parent.parent / "submissions_example"
Grade = Callable[[Path], Report]


def _only(report: Report, name: str) -> Diagnosis:
    (d,) = [d for d in report.diagnoses if d.name == name]
    return d


@pytest.mark.parametrize(
    ("path", "want"),
    [pytest.param(p, w, id=p, marks=[pytest.mark.framework] if w.get("requires") else []) for p, w in sorted(TABLE.items())],
)
def test_wording_corpus(path: str, want: dict, grade_path: Grade) -> None:  # type: ignore[type-arg]
    needs_framework(want.get("requires"))
    report = grade_path(WORDING / path)
    assert_verdict(report, want)
    if "assumes" in want:
        assert _only(report, "crash").evidence["assumes"] == want["assumes"]


def test_every_wording_file_is_listed() -> None:
    assert {p.name for p in WORDING.glob("*.py")} == set(TABLE)


# -- a crash that two sizes decide ---------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        "crash-dv-reshape-numpy.py",
        pytest.param("crash-dv-multihead-torch.py", marks=pytest.mark.framework),
        pytest.param("crash-dv-dot-product-attention-jax.py", marks=pytest.mark.framework),
    ],
)
def test_a_crash_on_every_input_with_dv_not_dk_says_the_code_assumes_them_equal(path: str, grade_path: Grade) -> None:
    needs_framework(TABLE[path].get("requires"))
    crash = _only(grade_path(WORDING / path), "crash")
    assert crash.fix.startswith(
        "It raises whenever the value size d_v differs from the key size d_k: the code assumes d_v == d_k "
        "(for example jax.nn.dot_product_attention and nn.MultiheadAttention without vdim require it). Instead, "
    )
    assert "vdim=d_v" in crash.fix and "a size written into the code" not in crash.fix
    assert "with d_v != d_k, runs on the " in crash.message and "with d_v == d_k" in crash.message


def test_a_crash_on_cross_attention_says_the_code_assumes_tq_equals_tk(grade_path: Grade) -> None:
    crash = _only(grade_path(WORDING / "crash-tq-square-scores.py"), "crash")
    assert crash.fix.startswith("It raises whenever the number of queries T_q differs from the number of keys T_k (cross-attention)")
    assert "the code assumes T_q == T_k" in crash.fix and "d_v" not in crash.fix


def test_a_crash_of_swapped_operands_says_to_multiply_weights_by_v(grade_path: Grade) -> None:
    crash = _only(grade_path(WORDING / "crash-swapped-product.py"), "crash")
    assert crash.fix.startswith("It raises whenever the value size d_v differs from the number of queries T_q")
    assert "weights @ V" in crash.fix and "a size written into the code" not in crash.fix


def test_a_crash_the_sizes_do_not_split_keeps_the_written_size_words(grade_path: Grade) -> None:
    """d_k written as 8: inputs with d_v != d_k run where d_k is 8, so no two sizes decide."""
    crash = _only(grade_path(CORPUS / "buggy" / "crash-fixed-feature-size.py"), "crash")
    assert "assumes" not in crash.evidence and "a size written into the code" in crash.fix
    every = _only(grade_path(CORPUS / "buggy" / "crash.py"), "crash")
    assert "assumes" not in every.evidence and every.fix.startswith("It raises ValueError on every input")


# -- in place, where autograd saved the tensor ----------------------------------------------------


@pytest.mark.framework
def test_an_in_place_softmax_is_told_as_in_place_and_located_there(grade_path: Grade) -> None:
    needs_framework("torch")
    path = WORDING / "not-differentiable-in-place-torch.py"
    d = _only(grade_path(path), "not-differentiable")
    assert d.evidence["in_place"] is True and d.evidence["saved_by"] == "exp"
    assert "s = s.exp()" in d.fix and "in-place" in d.fix
    assert ".detach()" not in d.fix and "no_grad" not in d.fix
    assert d.location is not None and d.location.code == "s /= s.sum(-1, keepdim=True)"
    assert path.read_text().splitlines()[d.location.line - 1].strip() == d.location.code


@pytest.mark.framework
def test_a_detached_graph_keeps_its_own_fix(grade_path: Grade) -> None:
    needs_framework("torch")
    d = _only(grade_path(EXAMPLES / "not_differentiable_torch.py"), "not-differentiable")
    assert "in_place" not in d.evidence and ".detach()" in d.fix


def test_the_in_place_error_and_the_operation_it_names() -> None:
    backward = "one of the variables needed for gradient computation has been modified by an inplace operation: [torch.DoubleTensor [4, 6]], which is output 0 of ExpBackward0, is at version 2"
    assert is_in_place_error(backward) and saved_by(backward) == "exp"
    assert saved_by("... which is output 0 of Exp, is at version 2") == "exp"
    assert is_in_place_error("a leaf Variable that requires grad is being used in an in-place operation.")
    assert not is_in_place_error("element 0 of tensors does not require grad and does not have a grad_fn")


def _body(source: str) -> list[ast.stmt]:
    function = ast.parse(source).body[0]
    assert isinstance(function, ast.FunctionDef)
    return [n for n in ast.walk(function) if isinstance(n, ast.stmt) and n is not function]


def test_the_in_place_statement_is_the_first_after_the_operation_named() -> None:
    source = "def f(Q):\n    q = Q.clone()\n    q /= 2\n    s = q.exp()\n    s[0] += 1\n    s.div_(3)\n    return s\n"
    assert in_place_statement(_body(source), "exp").lineno == 5  # type: ignore[union-attr]
    assert in_place_statement(_body(source), None).lineno == 3  # type: ignore[union-attr]
    assert in_place_statement(_body(source), "softmax").lineno == 3  # type: ignore[union-attr]
    counter = "def f(Q):\n    n = 0\n    for i in range(3):\n        n += 1\n    Q.requires_grad_()\n    return Q\n"
    assert in_place_statement(_body(counter), None) is None  # Python numbers, and no tensor changed


# -- bfloat16 -------------------------------------------------------------------------------------


def test_bfloat16_rounding_is_to_nearest_even_on_float32_top_bits() -> None:
    step = 2.0**-7  # bfloat16's step above 1
    values = np.array([1.0, 1 + step / 2, 1 + 3 * step / 2, 1 + step * 0.6, 3.0, -2.5, 0.0])
    assert to_bfloat16(values).tolist() == [1.0, 1.0, 1 + 2 * step, 1 + step, 3.0, -2.5, 0.0]


@pytest.mark.framework
def test_bfloat16_rounding_agrees_with_torch() -> None:
    needs_framework("torch")
    import torch

    values = np.random.default_rng(0).normal(size=2000) * 10.0 ** np.random.default_rng(1).integers(-6, 6, size=2000)
    theirs = torch.tensor(values, dtype=torch.float32).bfloat16().double().numpy()
    assert np.array_equal(to_bfloat16(values), theirs)


@pytest.mark.parametrize(
    "path",
    ["reduced-precision-bfloat16-numpy.py", pytest.param("reduced-precision-bfloat16-torch.py", marks=pytest.mark.framework)],
)
def test_bfloat16_compute_is_reduced_precision_with_its_line(path: str, grade_path: Grade) -> None:
    needs_framework(TABLE[path].get("requires"))
    d = _only(grade_path(WORDING / path), "reduced-precision")
    assert d.severity == "error" and d.evidence["precision"] == "bfloat16" and "bfloat16 grid" in d.message
    assert d.location is not None
    if "torch" in path:
        assert ".bfloat16()" in d.location.code


def test_float16_stays_float16(grade_path: Grade) -> None:
    d = _only(grade_path(CORPUS / "buggy" / "reduced-precision-float16.py"), "reduced-precision")
    assert d.evidence["precision"] == "float16"


def test_jax_bfloat16_is_located() -> None:
    tree = ast.parse("q = jnp.asarray(Q, dtype=jnp.bfloat16)\nk = K.astype(jnp.bfloat16)\n")
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)]
    found = narrowing_call(calls)
    assert found is not None and found.lineno == 1


# -- a checkout's note on the other files ---------------------------------------------------------

DEMO = 'import numpy as np\n\nif __name__ == "__main__":\n    def attention(Q, K, V):\n        return Q\n    print(attention(np.ones((2, 2)), None, None))\n'
SOLUTION = (CORPUS / "correct" / "swapaxes.py").read_text()


def test_a_definition_under_the_main_guard_is_not_one(tmp_path: Path, prepared: Prepared) -> None:
    (tmp_path / "demo.py").write_text(DEMO)
    (tmp_path / "solution.py").write_text(SOLUTION)
    found = find_in_checkout(tmp_path, Rule())
    assert found.file == tmp_path / "solution.py" and found.passed_over == ()
    report = grade_one(found, prepared, None)[0]
    assert report.passed and "also_defined_in" not in report.extra


def test_a_demo_that_defines_it_on_import_is_still_named(tmp_path: Path) -> None:
    (tmp_path / "demo.py").write_text(DEMO.replace('if __name__ == "__main__":', 'if __name__ != "__main__":'))
    (tmp_path / "solution.py").write_text(SOLUTION)
    assert find_in_checkout(tmp_path, Rule()).passed_over == (tmp_path / "demo.py",)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ('if __name__ == "__main__":\n    def attention(Q, K, V): ...\n', False),
        ('if "__main__" == __name__:\n    attention = None\n', False),
        ('if __name__ == "__main__":\n    pass\nelse:\n    def attention(Q, K, V): ...\n', True),
        ('if __name__ != "__main__":\n    def attention(Q, K, V): ...\n', True),
        ('if __name__ == "demo":\n    def attention(Q, K, V): ...\n', True),  # another name: it may run
    ],
    ids=["main", "main-reversed", "main-else", "not-main", "other-name"],
)
def test_what_the_main_guard_hides(tmp_path: Path, source: str, expected: bool) -> None:
    path = tmp_path / "f.py"
    path.write_text(source)
    assert defines_function(path, "attention") is expected


# -- a result kept from an earlier call --------------------------------------------------------


def test_a_result_cached_by_shape_is_told_as_an_earlier_calls(grade_path: Grade) -> None:
    hardcoded = _only(grade_path(CORPUS / "buggy" / "hardcoded-shape-cache.py"), "hardcoded")
    assert "fresh-4/values has the shapes of fresh-2/values and new values, and gets the weights of fresh-2/values" in hardcoded.message
    assert "lru_cache" in hardcoded.fix
    kept = _only(grade_path(CORPUS / "buggy" / "values-mismatch-output-by-shape.py"), "values-mismatch")
    assert "gets the output of batch-square/values" in kept.message and "lru_cache" in kept.fix


def test_a_constant_answer_is_not_told_as_an_earlier_calls(tmp_path: Path, grade_path: Grade) -> None:
    """Every call of the same shapes gets the same zeros: the same output, but never a right one."""
    path = tmp_path / "zeros.py"
    path.write_text("import numpy as np\n\ndef attention(Q, K, V):\n    return np.zeros(Q.shape[:-1] + V.shape[-1:])\n")
    mismatch = _only(grade_path(path), "values-mismatch")
    assert "earlier call" not in mismatch.message and "lru_cache" not in mismatch.fix


# -- which shift is missing ----------------------------------------------------------------------


def test_a_global_maximum_shift_is_told_apart_from_no_shift(grade_path: Grade) -> None:
    """s - s.max() keeps the rows near the array's maximum finite: it is told as a global shift;
    code that never shifts, all nan on the large probe, keeps the no-shift words."""
    global_max = _only(grade_path(CORPUS / "buggy" / "softmax-unstable-global-max.py"), "softmax-unstable")
    assert "subtracts the maximum of the whole array" in global_max.message
    unshifted = _only(grade_path(CORPUS / "buggy" / "softmax-unstable.py"), "softmax-unstable")
    assert "without subtracting the maximum" in unshifted.message and "whole array" not in unshifted.message


def test_the_sizes_assumed_are_read_from_the_stored_probes_only() -> None:
    """A fresh probe whose sizes happen to let a d_k reshape run does not change the words: they
    stay the same from run to run."""
    from grader.diagnosis.crash_words import assumed_equal
    from grader.observation import Observation
    from grader.probes import Probe

    def probe(name: str, d_k: int, d_v: int, fresh: bool = False) -> Probe:
        return Probe(name, name, "values", np.ones((3, d_k)), np.ones((4, d_k)), np.ones((4, d_v)), fresh=fresh)

    probes = {p.name: p for p in (probe("square", 4, 4), probe("wide", 4, 6), probe("fresh-1/values", 2, 4, fresh=True))}
    observed = {
        "square": Observation("square", 0, "returned", 0.0),
        "wide": Observation("wide", 0, "raised", 0.0),
        "fresh-1/values": Observation("fresh-1/values", 0, "returned", 0.0),  # 4 divisible by 2
    }
    (found,) = assumed_equal(probes, observed)
    assert found[0].equal == "d_v == d_k" and found[1:] == (1, 1)
