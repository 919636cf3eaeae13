"""The gradients check and its diagnoses (not-differentiable, gradient-mismatch, the gradient norms
of the scale mistakes).

The reference gradients, the suite switch, the probes, the protocol and the judgement are tested
as plain functions (the judgement on hand-made observations); the worker's half through the real
worker on PyTorch and JAX submissions written here, marked ``framework`` (they skip where the
framework is missing, and fail then under GRADER_REQUIRE_FRAMEWORKS=1).
"""

from __future__ import annotations

import importlib.util
import os
import textwrap
from dataclasses import replace
from pathlib import Path
from typing import Callable

import numpy as np
import pytest

from conftest import EXAMPLES, error_names
from grader.api import Prepared, grade_file
from grader.attention import attention
from grader.backward import attention_gradients
from grader.checks import run_checks
from grader.diagnosis.engine import diagnose
from grader.diagnosis.model import Diagnosis
from grader.errors import SuiteError
from grader.masks import masked_attention
from grader.observation import ErrorInfo, Gradients, MalformedMessage, Observation, Value, WorkerRun, parse_result
from grader.prepare import prepare
from grader.probes import GRADIENTS, Probe, build_probes
from grader.refdata import default_suite_path, load_references
from grader.report.model import Report
from grader.sandbox.runner import build_request
from grader.sandbox.protocol import decode
from grader.suite import parse_suite
from observing import observe

REQUIRE_FRAMEWORKS = os.environ.get("GRADER_REQUIRE_FRAMEWORKS") == "1"


def needs(framework: str) -> None:
    if importlib.util.find_spec(framework) is None:
        if REQUIRE_FRAMEWORKS:
            pytest.fail(f"{framework} is not installed but GRADER_REQUIRE_FRAMEWORKS=1")
        pytest.skip(f"{framework} is not installed")


def gradient_probes(prepared: Prepared) -> list[Probe]:
    return [p for p in prepared.probes if p.gradients]


# -- the reference ------------------------------------------------------------------------------


def _numeric(f: Callable[[np.ndarray], float], x: np.ndarray, index: tuple[int, ...], h: float = 1e-6) -> float:
    up, down = x.copy(), x.copy()
    up[index] += h
    down[index] -= h
    return (f(up) - f(down)) / (2 * h)


@pytest.mark.parametrize("masked", [False, True], ids=["plain", "causal"])
def test_reference_gradients_match_finite_differences(masked: bool) -> None:
    rng = np.random.default_rng(7)
    Q, K, V, G = rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 5, 4)), rng.standard_normal((2, 5, 6)), rng.standard_normal((2, 3, 6))
    mask = np.broadcast_to(np.tril(np.ones((3, 5), dtype=bool)), (2, 3, 5)).copy() if masked else None

    def loss(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> float:
        out = attention(q, k, v) if mask is None else masked_attention(q, k, v, mask)
        return float(np.sum(out * G))

    grads = attention_gradients(Q, K, V, G, mask)
    for label, x, indices in (("Q", Q, [(0, 0, 0), (1, 2, 3)]), ("K", K, [(0, 4, 0), (1, 0, 3), (1, 2, 1)]), ("V", V, [(0, 1, 5), (1, 4, 2)])):
        for index in indices:
            def f(changed: np.ndarray, label: str = label) -> float:
                return loss(*(changed if name == label else arg for name, arg in zip("QKV", (Q, K, V))))

            assert grads[label][index] == pytest.approx(_numeric(f, x, index), abs=1e-7), (label, index)
    if mask is not None:
        # Keys 3 and 4 come after each of the 3 queries: masked for all, they get no gradient.
        assert np.all(grads["K"][:, 3:] == 0.0) and np.all(grads["V"][:, 3:] == 0.0)


# -- suite, probes, request ---------------------------------------------------------------------


def default_text() -> str:
    return default_suite_path().read_text()


def test_default_suite_has_the_check_for_frameworks_only() -> None:
    suite = parse_suite(default_text(), "suite.yaml")
    assert [c.id for c in suite.checks if c.kind == GRADIENTS] == ["gradients"]
    assert suite.max_score == 17 and suite.max_score_for("torch") == suite.max_score_for("jax") == 17
    numpy = suite.for_framework("numpy")
    assert numpy.max_score == suite.max_score_for("numpy") == 16  # the NumPy maximum is unchanged
    assert GRADIENTS not in [c.kind for c in numpy.checks]


@pytest.mark.parametrize("switch", ["off", "false", "'off'"])
def test_gradients_off_turns_the_check_off(switch: str) -> None:
    suite = parse_suite(default_text().replace("gradients: on", f"gradients: {switch}"), "suite.yaml")
    assert GRADIENTS not in [c.kind for c in suite.checks] and "gradients" in suite.disabled
    assert suite.max_score == 16
    assert not any(p.gradients for p in build_probes(suite, load_references(suite), fresh_seed=1))
    assert suite.fingerprint() != parse_suite(default_text(), "suite.yaml").fingerprint()  # no cached verdict is reused


def test_a_bad_gradients_switch_names_its_line() -> None:
    text = default_text().replace("gradients: on", "gradients: sometimes")
    line = next(i for i, l in enumerate(text.splitlines(), start=1) if l.startswith("gradients:"))
    with pytest.raises(SuiteError, match=rf"suite.yaml:{line}: gradients: expected on or off, got a string 'sometimes'"):
        parse_suite(text, "suite.yaml")


def test_a_gradients_check_takes_masked_cases() -> None:
    text = "version: 1\nname: x\ncases:\n  c: {seed: 1, shape: {tq: 4, tk: 4, dk: 3, dv: 2}, mask: causal}\nchecks:\n  - {id: load}\n  - {id: g, kind: gradients, case: c}\n"
    suite = parse_suite(text, "s.yaml")
    assert [c.kind for c in suite.checks] == ["load", "gradients"]


def test_gradient_probes_come_last_with_a_fixed_G(prepared: Prepared) -> None:
    probes = prepared.probes
    kinds = [p.kind for p in probes]
    first = kinds.index(GRADIENTS)
    assert set(kinds[first:]) == {GRADIENTS} and [p.case for p in probes[first:]] == ["small", "head64", "multihead"]
    again = build_probes(prepared.suite, prepared.refs, fresh_seed=3)
    for a, b in zip(gradient_probes(prepared), [p for p in again if p.gradients]):
        assert a.G is not None and b.G is not None
        assert a.G.shape == a.Q.shape[:-1] + (a.V.shape[-1],)
        assert np.array_equal(a.G, b.G)  # the same G on every run
        assert np.array_equal(np.round(a.G * 256) / 256, a.G)  # on the inputs' grid
    small, head64 = gradient_probes(prepared)[:2]
    assert small.G is not None and head64.G is not None and small.G.flat[0] != head64.G.flat[0]


def test_the_request_asks_for_gradients_with_G_as_an_input_array(prepared: Prepared) -> None:
    request = build_request(Path("s.py"), "attention", prepared.probes, prepared.limits, {})
    meta, arrays = decode(memoryview(request)[4:])
    flags = {p["name"]: p["gradients"] for p in meta["probes"]}
    assert flags["head64/gradients"] is True and flags["head64/values"] is False
    assert np.array_equal(arrays["head64/gradients.G"], next(p.G for p in prepared.probes if p.name == "head64/gradients"))
    assert "head64/values.G" not in arrays


# -- the protocol -------------------------------------------------------------------------------


def _result(gradients: object) -> dict[str, object]:
    return {"kind": "result", "probe": "small/gradients", "call": 0, "status": "returned", "value": {"type": "torch.Tensor", "array": "out"}, "gradients": gradients}


def test_gradients_are_parsed_from_plain_arrays() -> None:
    out, dq = np.zeros((4, 5)), np.ones((4, 8))
    obs = parse_result(_result({"status": "computed", "none": ["K"], "item": 0, "duration": 0.01}), {"out": out, "grad.Q": dq, "grad.K": dq, "grad.V": np.ones((6, 5))})
    assert obs.gradients is not None and obs.gradients.status == "computed"
    assert obs.gradients.none == ("K",) and set(obs.gradients.arrays) == {"Q", "V"}  # a None input has no array


@pytest.mark.parametrize("field", [{"status": "great"}, "computed", {"status": "computed", "none": ["W"]}, {"status": "computed", "none": "Q"}])
def test_malformed_gradients_are_a_protocol_error(field: object) -> None:
    with pytest.raises(MalformedMessage):
        parse_result(_result(field), {"out": np.zeros((4, 5))})


# -- judgement from hand-made observations ------------------------------------------------------

Grads = Callable[[Probe, dict[str, np.ndarray]], Gradients]


def framework_run(prepared: Prepared, grads: Grads | None = None, output: Callable[[Probe], np.ndarray] | None = None, raised: ErrorInfo | None = None) -> WorkerRun:
    """A PyTorch submission's run: the reference on every forward probe, and on each gradient
    probe ``output`` (the reference's by default) with the gradients ``grads`` makes of the
    reference's."""
    run = observe(prepared.probes, attention)
    observations = dict(run.observations)
    for p in gradient_probes(prepared):
        assert p.G is not None
        if raised is not None:
            observations[(p.name, 0)] = Observation(p.name, 0, "raised", 0.0, error=raised)
            continue
        out = output(p) if output else attention(p.Q, p.K, p.V)
        reference = attention_gradients(p.Q, p.K, p.V, p.G)
        given = grads(p, reference) if grads else Gradients("computed", arrays=reference)
        observations[(p.name, 0)] = Observation(p.name, 0, "returned", 0.0, value=Value("torch.Tensor", array=out), gradients=given)
    return replace(run, observations=observations)


def judged(prepared: Prepared, run: WorkerRun, framework: str = "torch") -> tuple[dict[str, str], list[Diagnosis]]:
    suite = prepared.suite.for_framework(framework)
    checks = run_checks(suite, prepared.refs, run, prepared.probes)
    return {c.id: c.outcome for c in checks}, diagnose(suite, prepared.probes, run, checks)


def only(diagnoses: list[Diagnosis], name: str) -> Diagnosis:
    assert [d.name for d in diagnoses if d.severity == "error"] == [name], [d.message for d in diagnoses]
    return next(d for d in diagnoses if d.name == name)


def test_right_gradients_pass(prepared: Prepared) -> None:
    outcomes, diagnoses = judged(prepared, framework_run(prepared))
    assert outcomes["gradients"] == "passed" and diagnoses == []


def test_none_gradients_are_not_differentiable(prepared: Prepared) -> None:
    run = framework_run(prepared, lambda p, ref: Gradients("computed", arrays={"V": ref["V"]}, none=("Q", "K")))
    outcomes, diagnoses = judged(prepared, run)
    d = only(diagnoses, "not-differentiable")
    assert outcomes["gradients"] == "failed"
    assert d.evidence["inputs"] == ["Q", "K"] and d.evidence["how"] == "None"
    assert d.message.startswith("Q and K get no gradient") and "the gradient of V matches" in d.message


def test_zero_gradients_are_not_differentiable(prepared: Prepared) -> None:
    run = framework_run(prepared, lambda p, ref: Gradients("computed", arrays={**ref, "K": np.zeros_like(ref["K"])}))
    d = only(judged(prepared, run, "jax")[1], "not-differentiable")
    assert d.evidence["inputs"] == ["K"] and d.evidence["how"] == "zeros"
    assert "dK is all zeros" in d.message


def test_an_output_without_a_graph_gives_no_input_a_gradient(prepared: Prepared) -> None:
    run = framework_run(prepared, lambda p, ref: Gradients("no-gradient", none=("Q", "K", "V"), reason="the output does not require grad"))
    d = only(judged(prepared, run)[1], "not-differentiable")
    assert d.evidence["inputs"] == ["Q", "K", "V"] and d.evidence["how"] == "no-graph"


def test_a_call_that_raises_only_when_differentiated_is_not_differentiable(prepared: Prepared) -> None:
    error = ErrorInfo("RuntimeError", "Can't call numpy() on Tensor that requires grad.", line=5)
    outcomes, diagnoses = judged(prepared, framework_run(prepared, raised=error))
    d = only(diagnoses, "not-differentiable")
    assert outcomes["gradients"] == "failed" and outcomes["outputs"] == "passed"
    assert d.evidence["how"] == "raised" and d.evidence["line"] == 5 and "where a plain call returns" in d.message


def test_wrong_gradients_of_a_right_forward_are_a_gradient_mismatch(prepared: Prepared) -> None:
    run = framework_run(prepared, lambda p, ref: Gradients("computed", arrays={**ref, "Q": 2 * ref["Q"]}))
    d = only(judged(prepared, run)[1], "gradient-mismatch")
    assert d.evidence["inputs"] == ["Q"]
    assert d.evidence["gradient_norm_ratio"]["Q"] == pytest.approx(2.0)
    assert d.evidence["gradient_norm_ratio"]["V"] == pytest.approx(1.0)


def test_a_wrong_forward_is_no_gradient_mismatch(prepared: Prepared) -> None:
    # The gradient probe's own output is off: its gradients are expected to be off too.
    run = framework_run(prepared, lambda p, ref: Gradients("computed", arrays={**ref, "Q": 2 * ref["Q"]}), output=lambda p: 2 * attention(p.Q, p.K, p.V))
    names = [d.name for d in judged(prepared, run)[1]]
    assert "gradient-mismatch" not in names and "not-differentiable" not in names


def test_numpy_judgement_has_no_gradients_check(prepared: Prepared) -> None:
    outcomes, diagnoses = judged(prepared, observe(prepared.probes, attention), "numpy")
    assert "gradients" not in outcomes and diagnoses == []


def test_numpy_submissions_get_no_gradients_check(grade_path: Callable[[Path], Report]) -> None:
    report = grade_path(EXAMPLES / "correct.py")
    assert report.passed and "gradients" not in [c.id for c in report.checks]
    assert report.max_score == 16 == report.score


# -- through the worker (PyTorch, JAX) ----------------------------------------------------------

TORCH_OK = """
import math
import torch

def attention(q, k, v):
    return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.size(-1)), dim=-1) @ v
"""
JAX_OK = """
import jax
import jax.numpy as jnp

def attention(q, k, v):
    scores = q @ jnp.swapaxes(k, -1, -2) / jnp.sqrt(q.shape[-1])
    scores = scores - jax.lax.stop_gradient(scores.max(axis=-1, keepdims=True))  # right: the shift changes no gradient
    return jax.nn.softmax(scores, axis=-1) @ v
"""
TORCH_NUMPY_ROUND_TRIP = """
import numpy as np
import torch

def attention(q, k, v):
    Q, K, V = q.numpy(), k.numpy(), v.numpy()
    scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return torch.from_numpy(e / e.sum(axis=-1, keepdims=True) @ V)
"""
TORCH_NUMPY_OUT = """
import math
import torch

def attention(q, k, v):
    out = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.size(-1)), dim=-1) @ v
    return out.detach().numpy()
"""
TORCH_NO_GRAD = """
import math
import torch

def attention(q, k, v):
    with torch.no_grad():
        weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.size(-1)), dim=-1)
        return weights @ v
"""
TORCH_ITEM_LOOP = """
import math
import torch

def attention(q, k, v):
    out = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.size(-1)), dim=-1) @ v
    values = [x.item() for x in out.reshape(-1)]
    return torch.tensor(values, dtype=out.dtype).reshape(out.shape)
"""
JAX_NUMPY_ROUND_TRIP = """
import jax
import jax.numpy as jnp
import numpy as np

def attention(q, k, v):
    scores = np.asarray(q) @ np.swapaxes(np.asarray(k), -1, -2) / np.sqrt(q.shape[-1])
    return jax.nn.softmax(jnp.asarray(scores), axis=-1) @ v
"""
TORCH_SCALE_BY_DK = """
import torch

def attention(q, k, v):
    return torch.softmax(q @ k.transpose(-2, -1) / q.size(-1), dim=-1) @ v
"""
TORCH_SCALE_MISSING = """
import torch

def attention(q, k, v):
    return torch.softmax(q @ k.transpose(-2, -1), dim=-1) @ v
"""
# A custom autograd function whose backward is ``BODY`` (hostile ones included).
TORCH_BACKWARD = """
import math
import torch


class Attention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v):
        p = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.size(-1)), dim=-1)
        ctx.save_for_backward(q, k, v, p)
        return p @ v

    @staticmethod
    def backward(ctx, g):
        q, k, v, p = ctx.saved_tensors
        BODY


def attention(q, k, v):
    return Attention.apply(q, k, v)
"""


@pytest.fixture(scope="module")
def framework_grade(prepared: Prepared, tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Report]:
    folder = tmp_path_factory.mktemp("gradients")
    seen: dict[tuple[str, float | None], Report] = {}

    def grade(source: str, framework: str = "torch", timeout_s: float | None = None) -> Report:
        needs(framework)
        key = (source, timeout_s)
        if key not in seen:
            path = folder / f"submission_{len(seen)}.py"
            path.write_text(textwrap.dedent(source))
            limited = prepared if timeout_s is None else replace(prepared, limits=replace(prepared.limits, timeout_s=timeout_s))
            seen[key] = grade_file(path, limited)
        return seen[key]

    return grade


def gradients_check(report: Report) -> str:
    return next(c.outcome for c in report.checks if c.id == "gradients")


def diagnosis(report: Report, name: str) -> Diagnosis:
    assert error_names(report) == [name], [d.message for d in report.diagnoses]
    return next(d for d in report.diagnoses if d.name == name)


@pytest.mark.framework
@pytest.mark.parametrize(("source", "framework"), [(TORCH_OK, "torch"), (JAX_OK, "jax")], ids=["torch", "jax"])
def test_a_correct_submission_passes_the_gradient_check(framework_grade: Callable[..., Report], source: str, framework: str) -> None:
    report = framework_grade(source, framework)
    assert report.passed and gradients_check(report) == "passed"
    assert report.score == report.max_score == 17


@pytest.mark.framework
@pytest.mark.parametrize(
    ("example", "framework", "inputs", "line"),
    [
        ("not_differentiable_torch.py", "torch", ["Q", "K"], ".detach()"),
        ("not_differentiable_jax.py", "jax", ["Q", "K"], "jax.lax.stop_gradient("),
    ],
)
def test_the_examples_name_the_inputs_without_gradient(grade_path: Callable[[Path], Report], example: str, framework: str, inputs: list[str], line: str) -> None:
    needs(framework)
    report = grade_path(EXAMPLES / example)
    d = diagnosis(report, "not-differentiable")
    assert d.evidence["inputs"] == inputs
    assert gradients_check(report) == "failed" and report.score == 16  # every forward check passes
    assert d.location is not None and line in d.location.code


@pytest.mark.framework
@pytest.mark.parametrize(
    ("source", "framework", "how", "line"),
    [
        (TORCH_NUMPY_ROUND_TRIP, "torch", "raised", "q.numpy()"),
        (TORCH_NUMPY_OUT, "torch", "no-graph", ".detach().numpy()"),
        (TORCH_NO_GRAD, "torch", "no-graph", "torch.no_grad()"),
        (TORCH_ITEM_LOOP, "torch", "no-graph", ".item()"),
        (JAX_NUMPY_ROUND_TRIP, "jax", "raised", "np.asarray(q)"),
    ],
    ids=["torch-numpy-round-trip", "torch-numpy-out", "torch-no-grad", "torch-item-loop", "jax-numpy-round-trip"],
)
def test_no_graph_means_no_input_gets_a_gradient(framework_grade: Callable[..., Report], source: str, framework: str, how: str, line: str) -> None:
    report = framework_grade(source, framework)
    d = diagnosis(report, "not-differentiable")
    assert d.evidence["inputs"] == ["Q", "K", "V"] and d.evidence["how"] == how
    assert d.message.startswith("Q, K and V get no gradient")
    assert d.location is not None and line in d.location.code
    assert all(c.passed for c in report.checks if c.id != "gradients")  # the forward is right


@pytest.mark.framework
def test_a_wrong_custom_backward_is_a_gradient_mismatch(grade_path: Callable[[Path], Report]) -> None:
    needs("torch")
    report = grade_path(EXAMPLES / "gradient_mismatch_torch.py")
    d = diagnosis(report, "gradient-mismatch")
    assert d.evidence["inputs"] == ["Q", "K"] and d.evidence["gradient_norm_ratio"]["V"] == pytest.approx(1.0)
    assert d.location is not None and "def backward" in d.location.code
    assert "matches the reference, but the gradients of Q and K do not" in d.message


@pytest.mark.framework
@pytest.mark.parametrize(("source", "name", "lower"), [(TORCH_SCALE_BY_DK, "scale-by-dk", True), (TORCH_SCALE_MISSING, "scale-missing", False)])
def test_scale_mistakes_show_in_the_gradient_norms(framework_grade: Callable[..., Report], source: str, name: str, lower: bool) -> None:
    report = framework_grade(source)
    d = diagnosis(report, name)
    ratios = d.evidence["gradient_norm_ratio"]
    assert d.evidence["gradient_probe"] == "head64/gradients"  # the largest d_k
    assert set(ratios) == {"Q", "K", "V"}
    # Divided by d_k instead of sqrt(d_k): flat rows, a gradient of about 1/8 to Q and K; no
    # scale: scores 8 times larger, more than the saturated softmax takes back.
    assert (ratios["Q"] < 0.5 and ratios["K"] < 0.5) if lower else (ratios["Q"] > 2 and ratios["K"] > 2)
    assert f"|dQ| {ratios['Q']:.3g}" in d.message and "comes back through the" in d.message
    assert gradients_check(report) == "skipped"  # the forward is wrong: not reported twice


@pytest.mark.framework
def test_gradients_off_turns_it_off_for_frameworks(tmp_path: Path) -> None:
    needs("torch")
    suite = parse_suite(default_text().replace("gradients: on", "gradients: off"), str(tmp_path / "suite.yaml"))
    off = prepare(suite)
    path = tmp_path / "detach.py"
    path.write_text((EXAMPLES / "not_differentiable_torch.py").read_text())
    report = grade_file(path, off)
    assert report.passed and report.max_score == 16 == report.score
    assert "gradients" not in [c.id for c in report.checks]


# -- hostile backwards: bounded by the same limits, reported as data ---------------------------


@pytest.mark.framework
@pytest.mark.parametrize(
    ("body", "name", "evidence"),
    [
        ('raise ValueError("no backward here")', "not-differentiable", {"how": "backward-raised", "exception": "ValueError"}),
        ("import sys\n        sys.exit(3)", "not-differentiable", {"how": "backward-raised", "exception": "SystemExit"}),
        ("return torch.ones(3, 3, dtype=q.dtype), k, v", "not-differentiable", {"how": "backward-raised", "exception": "RuntimeError"}),
        ('return torch.full_like(q, float("nan")), torch.full_like(k, float("inf")), p.transpose(-2, -1) @ g', "gradient-mismatch", {"inputs": ["Q", "K"]}),
        ("return torch.ones(40000, 40000, 8, dtype=q.dtype), k, v", "memory-limit", {"exception": "RuntimeError"}),
        ("import os\n        os._exit(0)", "crash", {}),
    ],
    ids=["raises", "exits", "wrong-shape", "nan", "huge", "kills-the-worker"],
)
def test_a_hostile_backward_is_reported_as_data(framework_grade: Callable[..., Report], body: str, name: str, evidence: dict[str, object]) -> None:
    report = framework_grade(TORCH_BACKWARD.replace("BODY", body))
    d = diagnosis(report, name)
    assert {k: d.evidence.get(k) for k in evidence} == evidence
    assert gradients_check(report) == "failed"
    assert report.score == 16  # every forward observation came before the gradient probes


@pytest.mark.framework
def test_a_backward_that_hangs_is_stopped_by_the_time_limit(framework_grade: Callable[..., Report]) -> None:
    report = framework_grade(TORCH_BACKWARD.replace("BODY", "while True:\n            pass"), timeout_s=3.0)
    d = diagnosis(report, "timeout")
    assert d.evidence["probe"] == "small/gradients"
    assert gradients_check(report) == "failed" and report.score == 16
