"""Who a report is for: the reviewer sees everything; the candidate sees what they may.

``--audience candidate`` (a course's students on Gradescope, a feedback file sent to an
applicant) must not give away the suite: an expected value, a stored case's contents or a fresh
input would let the next submission copy the answers instead of computing them. So
:func:`for_candidate` returns a copy of a Report with, field by field:

Kept
    the path, the function, the verdict, the score, each check's id, title, outcome and points,
    the named mistakes (code, name, severity), their location (the candidate's own line) and
    their fix, the sandbox layers, the error of a submission that could not be graded (found
    before any call, so it says nothing of the inputs), and ``extra`` (framework, candidate).

Rewritten
    ``Diagnosis.message``: the rule's plain sentence (``Rule.summary`` in
    ``grader.diagnosis.registry``), the plain explanation. The measured messages of ``grader.diagnosis.describe`` mix the submission's own
    figures with the reference's (the reference's mean max weight and entropy next to the scale
    found, the share of weight the reference puts above the diagonal, ``got ..., expected ...``
    of an unexplained mismatch), the probes' shapes and exception texts the submission wrote; a
    filter per message would quietly go stale as messages grow, so none is kept.

    ``CheckResult.summary`` of a failed check with cases: rebuilt from its cases as ``n of m
    comparisons fail; <case> <what>: <reason>``, the reason reduced to what gives nothing away:
    how many elements differ (no maximum difference, no worst element, no ``expected``), a shape
    or dtype returned, a raised exception's type and line (its message is the submission's own
    text, and the submission could put the inputs in it), a check of the submission's own
    behaviour (inputs changed, calls disagree, rows not summing to 1). A reason of any other form
    becomes ``<what> does not match``. Summaries of passed checks and of checks with no cases
    (loading, skipped) name only shapes and the file's own import, and stay.

Removed
    ``CaseResult.expected`` (the reference's arrays) and ``CaseResult.actual`` (the submission's
    arrays on the hidden inputs: ``return V`` would hand back a stored V), so no heat map;
    ``CaseResult.mismatch`` (its worst element holds an expected value); ``CaseResult.summary``
    is reduced as above; ``CheckResult.figures`` and ``Diagnosis.evidence`` (measured figures of
    both sides); the text of what the submission printed (it ran on the hidden inputs and could
    print them), of which only the byte count stays.

The copy is marked ``extra["audience"] = "candidate"``, so filtering twice changes nothing and a
reporter can say why the printed text is not shown.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Literal

from grader.checks.base import CaseResult, CheckResult
from grader.diagnosis.model import Diagnosis
from grader.diagnosis.registry import BY_NAME
from grader.observation import CapturedOutput
from grader.report.model import Report

Audience = Literal["reviewer", "candidate"]
AUDIENCES: tuple[Audience, ...] = ("reviewer", "candidate")
MARK = "audience"
# Evidence that names the mistake's formula, from the catalogue's own words: no value of either side.
_NAMING_EVIDENCE = ("reproduced_by", "formula")

# Reasons a failed comparison may keep as they are: each describes only the submission's own
# result (its shape, dtype, type, what it did to its inputs, whether two calls agree).
_SAFE_REASONS = re.compile(
    r"^(returned shape \([\d, ]*\), expected \([\d, ]*\)"
    r"|returned dtype [\w.]+, expected a floating-point array"
    r"|returned [\w.]+, not an array"
    r"|no result(: the submission ran out of (time|memory))?"
    r"|returned weights of shape \([\d, ]*\) and dtype [\w.]+, expected \([\d, ]*\)"
    r"|(Q|K|V)(, (Q|K|V))*( and (Q|K|V))? changed by the call"
    r"|the inputs were not returned after the call"
    r"|call 1 (returned|raised), call 2 (returned|raised)"
    r"|both calls (returned|raised) without an array to compare"
    r"|two calls return shapes \([\d, ]*\) and \([\d, ]*\)"
    r"|two calls differ in \d+ of \d+ elements"
    r"|rows sum to [-+\w.]+\.\.[-+\w.]+ instead of 1)$"
)
# A count of non-finite values, without what follows it (the largest score of the hidden input).
_NONFINITE = re.compile(r"^\d+ of \d+ values are (nan or inf|not finite)")
# "raised ValueError: the message ... (line 12)": the type and the line stay.
_RAISED = re.compile(r"^raised (?P<type>[\w.]+)(?:: .*?)?(?P<where> \((?:cell \d+, )?line \d+\))?$", re.DOTALL)


def shown_to(report: Report, audience: str) -> Report:
    """The report as ``audience`` may see it: as it is for the reviewer, filtered for the candidate."""
    return for_candidate(report) if audience == "candidate" else report


def is_for_candidate(report: Report) -> bool:
    return report.extra.get(MARK) == "candidate"


def for_candidate(report: Report) -> Report:
    """A copy of ``report`` with nothing a candidate may not see (see the module docstring)."""
    if is_for_candidate(report):
        return report
    output = report.output
    return replace(
        report,
        checks=tuple(_check(c) for c in report.checks),
        diagnoses=tuple(_diagnosis(d) for d in report.diagnoses),
        output=CapturedOutput(text="", total_bytes=output.total_bytes, kept_bytes=0),
        extra={**report.extra, MARK: "candidate"},
    )


def case_reason(case: CaseResult) -> str:
    """Why one comparison failed, in words that reveal no expected value and no input."""
    if case.mismatch is not None and not case.mismatch.ok:
        m = case.mismatch
        text = f"{m.mismatched} / {m.total} elements differ ({m.percent:.1f} %)"
        return text + (f"; {m.nonfinite} non-finite values" if m.nonfinite else "")
    summary = " ".join(case.summary.split())
    if _SAFE_REASONS.match(summary):
        return summary
    if summary.startswith("no result"):
        return "no result"  # the worker's end (a crash, a broken protocol), not a comparison
    nonfinite = _NONFINITE.match(summary)
    if nonfinite:
        return nonfinite.group(0)
    raised = _RAISED.match(summary)
    if raised:
        return f"raised {raised.group('type')}{raised.group('where') or ''}"
    return f"{case.what} does not match"


def _case(case: CaseResult) -> CaseResult:
    summary = case.summary if case.passed else case_reason(case)
    return CaseResult(case.case, case.probe, case.what, case.passed, summary)


def _check(check: CheckResult) -> CheckResult:
    cases = tuple(_case(c) for c in check.cases)
    summary = check.summary
    failed = [c for c in cases if not c.passed]
    if not check.passed and failed:
        first = failed[0]
        summary = f"{len(failed)} of {len(cases)} comparisons fail; {first.case} {first.what}: {first.summary}"
    return replace(check, summary=summary, cases=cases, figures={})


def _diagnosis(d: Diagnosis) -> Diagnosis:
    rule = BY_NAME.get(d.name)
    message = rule.summary if rule is not None else f"{d.name}: see grade explain {d.code}"
    naming = {key: d.evidence[key] for key in _NAMING_EVIDENCE if isinstance(d.evidence.get(key), str)}
    return replace(d, message=message, evidence=naming)
