"""--audience candidate: what a candidate may see, in every format; the reviewer sees everything.

The secrets are real ones, taken from grading: the expected values the mismatch statistics name,
the reference's figures in a diagnosis message, and a stored input a submission printed or put
in an exception's message. Each must be in the reviewer's report (so the test can see them) and
in no candidate's.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from conftest import EXAMPLES
from grader.diagnosis.registry import BY_NAME
from grader.pipeline import grade_file
from grader.prepare import Prepared
from grader.report.audience import case_reason, for_candidate, is_for_candidate, shown_to
from grader.report.base import RunInfo
from grader.report.files import render_document
from grader.report.model import Report

FORMATS = ("text", "json", "junit", "csv", "markdown", "gradescope", "github")
REVIEWER = RunInfo("attention-default", 15.0, verbose=True)  # verbose: the text report with every figure
CANDIDATE = replace(REVIEWER, audience="candidate")

# Wrong by a scale (so every value check fails with figures), printing its first input and, on a
# batched input, raising with it in the message: a candidate could read stored inputs this way.
LEAKY = '''import numpy as np


def attention(Q, K, V):
    print("first input", repr(float(Q.flat[0])))
    if Q.ndim > 2:
        raise ValueError("first input " + repr(float(Q.flat[0])))
    scores = Q @ np.swapaxes(K, -1, -2) / Q.shape[-1]
    w = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return (w / w.sum(axis=-1, keepdims=True)) @ V
'''


@pytest.fixture(scope="module")
def leaky(tmp_path_factory: pytest.TempPathFactory, prepared: Prepared) -> Report:
    path = tmp_path_factory.mktemp("leaky") / "leaky.py"
    path.write_text(LEAKY)
    return grade_file(path, prepared)


def expected_values(report: Report) -> set[str]:
    """Every expected value a failed comparison names, as the reports write it."""
    found = set()
    for check in report.checks:
        for case in check.cases:
            if case.mismatch is not None and not case.mismatch.ok:
                found |= {f"{case.mismatch.expected:.6g}", repr(case.mismatch.expected)}
    return found


def stored_inputs(prepared: Prepared) -> set[str]:
    return {repr(float(case.Q.flat[0])) for case in prepared.refs.cases.values()}


def secrets(report: Report, prepared: Prepared) -> set[str]:
    found = expected_values(report) | stored_inputs(prepared)
    for d in report.diagnoses:
        reference = d.evidence.get("reference_mean_max_weight")
        if isinstance(reference, float):
            found.add(f"{reference:.3f}")  # "mean max weight 0.128 vs 0.289": the second is the reference's
    return found


def test_the_candidates_copy_holds_no_array_statistic_or_printed_text(grade_path) -> None:  # type: ignore[no-untyped-def]
    report = grade_path(EXAMPLES / "seed_buggy.py")
    shown = for_candidate(report)
    cases = [case for check in shown.checks for case in check.cases]
    assert cases and all(c.expected is None and c.actual is None and c.mismatch is None for c in cases)
    assert all(not check.figures for check in shown.checks)
    assert shown.output.text == "" and shown.output.total_bytes == report.output.total_bytes
    # What stays: the verdict, the points, pass/fail per check, the bugs with their line and fix.
    assert (shown.passed, shown.score, [c.outcome for c in shown.checks]) == (report.passed, report.score, [c.outcome for c in report.checks])
    assert [(d.code, d.location, d.fix) for d in shown.diagnoses] == [(d.code, d.location, d.fix) for d in report.diagnoses]
    assert [d.message for d in shown.diagnoses] == [BY_NAME[d.name].summary for d in report.diagnoses]
    assert all(set(d.evidence) <= {"reproduced_by", "formula"} for d in shown.diagnoses)
    weights = next(c for c in shown.checks if c.id == "weights")
    assert weights.summary.startswith("4 of 4 comparisons fail; single weights: 15 / 15 elements differ")
    assert "expected" not in weights.summary and "max abs" not in weights.summary


def test_filtering_is_idempotent_and_the_reviewer_gets_the_report_as_is(grade_path) -> None:  # type: ignore[no-untyped-def]
    report = grade_path(EXAMPLES / "seed_buggy.py")
    once = for_candidate(report)
    assert is_for_candidate(once) and not is_for_candidate(report)
    assert for_candidate(once) is once and shown_to(once, "candidate") is once
    assert shown_to(report, "reviewer") is report


def test_a_raised_message_keeps_its_type_and_line_only(leaky: Report) -> None:
    batch = next(c for c in for_candidate(leaky).checks if c.id == "batch")
    assert batch.summary.endswith("batch output: raised ValueError (line 7)"), batch.summary
    assert "first input" not in batch.summary


def test_a_reason_of_an_unknown_form_says_only_what_failed(grade_path) -> None:  # type: ignore[no-untyped-def]
    case = next(c for check in grade_path(EXAMPLES / "seed_buggy.py").checks for c in check.cases if c.mismatch is None and not c.passed)
    assert case_reason(replace(case, summary="the reference says 0.639133")) == f"{case.what} does not match"
    assert case_reason(replace(case, summary="returned shape (3, 5), expected (3, 7)")) == "returned shape (3, 5), expected (3, 7)"
    assert case_reason(replace(case, summary="15 of 15 values are nan or inf (scores up to 4133)")) == "15 of 15 values are nan or inf"


@pytest.mark.parametrize("fmt", FORMATS)
def test_no_format_shows_a_candidate_the_suites_answers(fmt: str, grade_path, leaky: Report, prepared: Prepared) -> None:  # type: ignore[no-untyped-def]
    for report in (grade_path(EXAMPLES / "seed_buggy.py"), leaky):
        hidden = secrets(report, prepared)
        reviewer = render_document(fmt, [report], REVIEWER)  # type: ignore[arg-type]
        candidate = render_document(fmt, [report], CANDIDATE)  # type: ignore[arg-type]
        if fmt != "csv":  # a gradebook has no figure to hide
            assert any(secret in reviewer for secret in hidden), (fmt, report.path)
        assert not [secret for secret in hidden if secret in candidate], (fmt, report.path)
        # What stays for the candidate: the bugs by name.
        assert all(d.name in candidate for d in report.errors), fmt
        if fmt == "json":
            doc = json.loads(candidate)
            cases = [c for s in doc["submissions"] for check in s["checks"] for c in check["cases"]]
            assert all(c["mismatch"] is None and "matrices" not in c for c in cases)
            assert all(s["output"]["text"] == "" for s in doc["submissions"])


def test_the_text_report_tells_a_candidate_why_the_printed_text_is_missing(leaky: Report) -> None:
    text = render_document("text", [leaky], replace(CANDIDATE, verbose=False))
    assert "not shown: it ran on the hidden inputs" in text and "weights of" not in text  # nor a heat map
    assert "weights of" in render_document("text", [leaky], replace(REVIEWER, verbose=False))


def test_gradescope_visibility_follows_the_audience(grade_path) -> None:  # type: ignore[no-untyped-def]
    report = grade_path(EXAMPLES / "seed_buggy.py")
    candidate = json.loads(render_document("gradescope", [report], CANDIDATE))
    assert candidate["stdout_visibility"] == "visible"  # the grader's stdout is the candidate's report too
    assert {t["visibility"] for t in candidate["tests"]} == {"visible"}
    assert [t["status"] for t in candidate["tests"]] == ["passed" if c.passed else "failed" for c in report.checks]
    weights = next(t for t in candidate["tests"] if t["name"].startswith("weights:"))
    assert "S201 scale-by-dk" in weights["output"] and "Fix: " in weights["output"] and "line 12" in weights["output"]
    assert "Measured" not in weights["output"] and "Evidence" not in weights["output"]
    reviewer = json.loads(render_document("gradescope", [report], REVIEWER))
    assert reviewer["stdout_visibility"] == "hidden" and all("visibility" not in t for t in reviewer["tests"])
