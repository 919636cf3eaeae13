"""The shortcuts that keep the grader's judgement cheap give exactly what the long way gives.

Each shortcut answers a common case in fewer steps (a finite result against a prediction stack,
imports found by walking statements only, a stack of predictions split in two); these tests hold
it to the general computation it replaces, on random and hand-made inputs.
"""

from __future__ import annotations

import ast
import functools
import itertools

import numpy as np
import pytest

from grader.compare import compare
from grader.diagnosis import catalogue
from grader.diagnosis.catalogue import NORMALISE, PRODUCT, SHIFT, _meaningful, softmax_stack
from grader.diagnosis.replay import Stack, agrees_stack
from grader.frameworks import imported_modules, parse_source, statements
from grader.suite import Tolerance

TOLERANCE = Tolerance(rtol=1e-6, atol=1e-9)


def _stack_and_actual(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """A stack of predictions around an actual result: some equal to it, some off by a little
    or a lot, some with NaN or inf in places."""
    actual = rng.standard_normal((3, 4))
    predicted = np.repeat(actual[None], 8, axis=0)
    predicted[1] += 1e-3
    predicted[2] += rng.standard_normal((3, 4)) * 1e-12
    predicted[3, 0, 0] = np.nan
    predicted[4, 1, 2] = np.inf
    predicted[5, 2, 3] = -np.inf
    predicted[6] *= 1.0 + 5e-7
    predicted[7] *= 1.0 + 5e-6
    return actual, predicted


@pytest.mark.parametrize("loose", [False, True])
@pytest.mark.parametrize("seed", range(20))
def test_stack_agrees_as_agrees_stack_on_finite_results(seed: int, loose: bool) -> None:
    actual, predicted = _stack_and_actual(np.random.default_rng(seed))
    with np.errstate(all="ignore"):
        want = agrees_stack(actual, predicted, TOLERANCE, loose)
        got = Stack(predicted).agrees(actual, True, TOLERANCE, loose)
    assert got.tolist() == want.tolist()
    assert want.any() and not want.all()  # the cases tell something


@pytest.mark.parametrize("loose", [False, True])
def test_stack_agrees_with_non_finite_results_takes_the_long_way(loose: bool) -> None:
    actual, predicted = _stack_and_actual(np.random.default_rng(0))
    actual[0, 0] = np.nan
    with np.errstate(all="ignore"):
        assert Stack(predicted).agrees(actual, False, TOLERANCE, loose).tolist() == agrees_stack(actual, predicted, TOLERANCE, loose).tolist()


def _choice(**options: catalogue.Option) -> tuple[catalogue.Option, ...]:
    """The reference's choice with the options given by axis name replaced."""
    return tuple(options.get(a.name, a.default) for a in catalogue.AXES)


def test_a_split_stack_predicts_the_same_values() -> None:
    """The catalogue's scales and a submission's fitted ones are replayed as two stacks: each
    prediction must come out bit for bit as in one stack of them all."""
    rng = np.random.default_rng(7)
    for trial in range(40):
        batch = tuple(int(n) for n in rng.integers(1, 4, size=trial % 3))
        tq, tk, dk, dv = (int(n) for n in rng.integers(1, 9, size=4))
        magnitude = 1e3 if trial % 4 == 0 else 1.0
        Q, K = rng.standard_normal(batch + (tq, dk)) * magnitude, rng.standard_normal(batch + (tk, dk)) * magnitude
        V = rng.standard_normal(batch + (tk, dv))
        factors = rng.uniform(0.01, 3.0, size=19)
        for product in PRODUCT.options:
            try:
                raw = np.asarray(product.apply(Q, K))
            except ValueError:
                continue
            shape = (-1,) + (1,) * raw.ndim
            for norm in NORMALISE.options:
                for shift in SHIFT.options:
                    if not _meaningful(_choice(product=product, softmax=norm, shift=shift)):
                        continue
                    with np.errstate(all="ignore"):
                        try:
                            whole = softmax_stack(raw[None] * factors.reshape(shape), norm.apply, shift.apply)
                        except ValueError:
                            continue
                        parts = [softmax_stack(raw[None] * f.reshape(shape), norm.apply, shift.apply) for f in (factors[:17], factors[17:])]
                        assert np.array_equal(whole, np.concatenate(parts), equal_nan=True)
                        if raw.shape[-1] == V.shape[-2]:
                            joined = np.concatenate([np.matmul(p, V) for p in parts])
                            assert np.array_equal(np.matmul(whole, V), joined, equal_nan=True)


def test_compare_of_a_match_and_of_a_mismatch() -> None:
    expected = np.linspace(-1.0, 1.0, 12).reshape(3, 4)
    assert compare(expected.astype(np.float32), expected, Tolerance(rtol=1e-5, atol=1e-6)).ok
    actual = expected.copy()
    actual[1, 2] += 0.5
    actual[2, 0] += 0.25
    found = compare(actual, expected, TOLERANCE)
    assert (found.mismatched, found.worst_index, found.nonfinite) == (2, (1, 2), 0)
    assert found.max_abs == pytest.approx(0.5)
    assert found.max_rel == pytest.approx(max(0.5 / abs(expected[1, 2]), 0.25 / abs(expected[2, 0])))


def test_compare_ranks_nan_above_inf_and_reports_nan_figures() -> None:
    expected = np.ones((2, 3))
    actual = expected.copy()
    actual[0, 1] = np.inf
    actual[1, 2] = np.nan
    found = compare(actual, expected, TOLERANCE)
    assert (found.mismatched, found.worst_index, found.nonfinite) == (2, (1, 2), 2)
    assert np.isnan(found.max_abs)


SOURCE = '''
import numpy as np
from os import path
try:
    import torch
except ImportError:
    from jax import numpy as jnp
else:
    import json
finally:
    import re
class A:
    import math
    def f(self):
        for i in range(3):
            import flax
        else:
            import equinox
        with open("x") as h:
            from collections import deque
        match self:
            case 1:
                import csv
def g():
    lambda: __import__("sys")
if __name__ == "__main__":
    import jaxlib
'''


def test_statements_find_the_imports_ast_walk_finds_in_its_order() -> None:
    tree = ast.parse(SOURCE)
    kinds = (ast.Import, ast.ImportFrom)
    assert [n for n in statements(tree) if isinstance(n, kinds)] == [n for n in ast.walk(tree) if isinstance(n, kinds)]


def test_imported_modules_skip_main_guards_only() -> None:
    modules = imported_modules(ast.parse(SOURCE))
    assert sorted(modules) == sorted(["numpy", "os", "torch", "jax", "json", "re", "math", "flax", "equinox", "collections", "csv"])


def test_parse_source_shares_one_tree_per_text_and_raises_like_ast_parse() -> None:
    text = "def attention(Q, K, V):\n    return Q\n"
    assert parse_source(text) is parse_source(text)
    assert ast.dump(parse_source(text)) == ast.dump(ast.parse(text))
    with pytest.raises(SyntaxError):
        parse_source("def (:\n")


@functools.cache
def _every_meaningful() -> list[catalogue.Variant]:
    """The plain definition of the catalogue: every choice of the whole product that is meaningful
    (made once: the product has a quarter of a million choices)."""
    return [catalogue.Variant(c) for c in itertools.product(*(a.options for a in catalogue.AXES)) if catalogue._meaningful(c)]


@pytest.mark.parametrize("most", [0, 1, 2, 3, 5])
def test_the_catalogue_is_every_meaningful_choice_with_few_mistakes_in_product_order(most: int) -> None:
    """build_variants enumerates only the choices it keeps; the plain definition, filtering the
    whole product, gives the same variants in the same order."""
    every = _every_meaningful()
    expected = sorted((v for v in every if len(v.deviations) <= most), key=lambda v: len(v.deviations))
    assert [v.choice for v in catalogue.build_variants(max_deviations=most)] == [v.choice for v in expected]


def test_the_catalogue_is_made_a_tier_at_a_time_in_the_order_of_the_full_list(monkeypatch: pytest.MonkeyPatch) -> None:
    """Iterating gives build_variants' order, extra (fitted) variants after the fixed ones with
    as many mistakes, and a search that stops early makes no tier past the one it stopped in."""
    monkeypatch.setattr(catalogue, "_TIERS", {})
    every = catalogue.build_variants()
    fitted = catalogue.fitted_scale_option("d_k", 1.0, -0.25)
    extra = [catalogue.with_scale(v, fitted) for v in every if len(v.deviations) <= 2 and v.option("scale") is catalogue.SCALE.default]
    first_two = next(v for v in catalogue.all_variants() if len(v.deviations) == 2)
    assert sorted(catalogue._TIERS) == [0, 1, 2] and first_two is catalogue.tier(2)[0]
    assert [v.choice for v in catalogue.all_variants()] == [v.choice for v in every]
    expected = sorted(every + extra, key=lambda v: len(v.deviations))
    assert [v.choice for v in catalogue.Catalogue(extra)] == [v.choice for v in expected]


@pytest.mark.parametrize(
    ("source", "frameworks"),
    [
        # NumPy code, torch only in its own test: NumPy.
        ("import numpy as np\nimport torch\ndef attention(Q, K, V):\n    return np.exp(Q)\ndef test_a():\n    torch.ones(1)\n", set()),
        ("import numpy as np\ndef attention(Q, K, V):\n    return np.exp(Q)\ndef test_a():\n    import torch\n", set()),
        ("import numpy as np\nimport jax.numpy as jnp\ndef attention(Q, K, V):\n    return np.exp(Q)\nclass TestA:\n    def test(self):\n        jnp.ones(1)\n", set()),
        # An import never used by name still counts: tensor methods need none.
        ("import numpy as np\nimport torch\ndef attention(q, k, v):\n    return np.exp(q)\n", {"torch"}),
        # The code uses torch itself, or calls a tensor-only method, or passes dim=: torch.
        ("import numpy as np\nimport torch\ndef attention(q, k, v):\n    return torch.exp(q) * np.e\ndef test_a():\n    torch.ones(1)\n", {"torch"}),
        ("import numpy as np\nimport torch\ndef attention(q, k, v):\n    return (q / np.sqrt(4)).softmax(-1)\ndef test_a():\n    torch.ones(1)\n", {"torch"}),
        ("import numpy as np\nimport torch\ndef attention(q, k, v):\n    return np.sqrt(q).sum(dim=-1)\ndef test_a():\n    torch.ones(1)\n", {"torch"}),
        # No NumPy name in the code: tensor methods alone, with a torch test: torch.
        ("import torch\ndef attention(q, k, v):\n    return q @ k.transpose(-2, -1)\ndef test_a():\n    torch.ones(1)\n", {"torch"}),
        # A main guard's imports never count, as before.
        ("import numpy as np\ndef attention(Q, K, V):\n    return Q\nif __name__ == '__main__':\n    import torch\n", set()),
    ],
    ids=["test-function", "import-in-test", "test-class", "unused", "torch-in-code", "tensor-method", "dim-keyword", "methods-only", "main-guard"],
)
def test_a_framework_only_the_file_s_tests_use_does_not_count_for_numpy_code(source: str, frameworks: set[str]) -> None:
    from grader.frameworks import imported_frameworks

    assert imported_frameworks(source) == frameworks
