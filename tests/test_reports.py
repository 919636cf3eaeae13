"""Every report format over the same Reports: produced, parsed back, escaped, and round-tripped."""

from __future__ import annotations

import csv
import io
import json
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path

import pytest

from conftest import EXAMPLES
from grader.diagnosis.model import Diagnosis, Location
from grader.diagnosis.registry import BY_NAME
from grader.errors import UsageError
from grader.report.registry import FORMATS, RunInfo, make_reporter
from grader.report.files import render_document
from grader.report.fixtext import is_code
from grader.report.markdown import md_fix
from grader.report.github import annotation_lines, escape_data, escape_property
from grader.report.jsonfmt import report_dict, report_from_dict
from grader.report.junit import xml_text
from grader.report.model import Report

INFO = RunInfo("attention-default", 10.0)
HOSTILE_TEXT = "nul\x00 esc\x1b[31m bell\x07 surrogate\ud800 ffff\uffff <tag> & \"quote\""


@pytest.fixture(scope="module")
def reports(grade_path) -> list[Report]:  # type: ignore[no-untyped-def]
    return [grade_path(EXAMPLES / name) for name in ("seed_buggy.py", "correct.py", "load_error.py")]


def render(fmt: str, reports: list[Report]) -> str:
    return render_document(fmt, reports, INFO)  # type: ignore[arg-type]


def hostile(report: Report) -> Report:
    """The same report with candidate-controlled text full of characters that break formats."""
    d = report.diagnoses[0]
    bad = replace(d, message=HOSTILE_TEXT, location=Location(file="sub,dir/a:b.py", line=7, code="x = 1"))
    return replace(report, path="cand,=1|x\n.py", diagnoses=(bad, *report.diagnoses[1:]), output=replace(report.output, text=HOSTILE_TEXT))


def test_every_format_renders(reports: list[Report]) -> None:
    for fmt in FORMATS:
        # Gradescope's results.json is one submission's (see test_gradescope_results).
        assert render(fmt, reports[:1] if fmt == "gradescope" else reports).strip(), fmt


def test_json_round_trips_through_from_dict(reports: list[Report]) -> None:
    for report in reports:
        data = json.loads(json.dumps(report_dict(report)))
        again = report_from_dict(data, report.suite)
        assert report_dict(again) == data
        assert again.passed == report.passed and [d.name for d in again.diagnoses] == [d.name for d in report.diagnoses]


@pytest.mark.parametrize(
    "damage",
    [
        lambda d: d.pop("checks"),
        lambda d: d.update(passed="yes"),
        lambda d: d["diagnoses"][0].update(severity="fatal"),
        lambda d: d["checks"][0].update(outcome="maybe"),
        lambda d: d["checks"][2]["cases"][0]["mismatch"].update(worst_index=["0"]),
        lambda d: d["output"].update(truncated_bytes=-1),
        lambda d: d.update(score=True),
        # Edited by hand: well-formed, but not what the grader writes.
        lambda d: d.update(passed=True),
        lambda d: d.update(score=99.0),
        lambda d: d.update(score=d["score"] + 1),
        lambda d: d.update(score=float("nan")),
    ],
    ids=["missing-field", "bool-as-text", "bad-severity", "bad-outcome", "bad-index", "bad-output", "bool-as-number", "passed-edited", "score-over-max", "score-not-the-sum", "score-nan"],
)
def test_from_dict_refuses_damaged_data(reports: list[Report], damage) -> None:  # type: ignore[no-untyped-def]
    data = json.loads(json.dumps(report_dict(reports[0])))
    damage(data)
    with pytest.raises(ValueError):
        report_from_dict(data, "attention-default")


def test_junit_structure(reports: list[Report]) -> None:
    root = ET.fromstring(render("junit", reports))
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == [r.path for r in reports]
    buggy = suites[0]
    cases = {c.get("name"): c for c in buggy.findall("testcase")}
    assert list(cases) == [c.id for c in reports[0].checks]
    failure = cases["weights"].find("failure")
    assert failure is not None
    scale = next(d for d in reports[0].diagnoses if d.name == "scale-by-dk")
    assert scale.message in (failure.get("message") or "")
    assert "Why: " in (failure.text or "") and "Fix: " in (failure.text or "")
    assert int(buggy.get("failures", "0")) == sum(1 for c in reports[0].checks if c.outcome == "failed")
    assert suites[1].get("failures") == "0" and suites[1].findall(".//failure") == []
    assert int(root.get("tests", "0")) == sum(int(s.get("tests", "0")) for s in suites)
    # CI reporters key a test by (classname, name): every submission's checks stay apart.
    keys = [(c.get("classname"), c.get("name")) for c in root.iter("testcase")]
    assert len(keys) == len(set(keys)) and all(reports[0].path in (c.get("classname") or "") for c in buggy.findall("testcase"))


def test_junit_escapes_characters_xml_cannot_hold(reports: list[Report]) -> None:
    text = render("junit", [hostile(reports[0])])
    root = ET.fromstring(text)  # would raise on a raw NUL, ESC or lone surrogate
    failures = [f for f in root.iter("failure") if "nul" in (f.get("message") or "")]
    assert failures
    message = failures[0].get("message") or ""
    assert "nul\\x00 esc\\x1b[31m bell\\x07 surrogate\\ud800 ffff\\uffff <tag> & \"quote\"" in message
    # a name is one line: the newline in it is shown, not kept
    assert root.find("testsuite") is not None and root.find("testsuite").get("name") == "cand,=1|x\\n.py"  # type: ignore[union-attr]


def test_xml_text_keeps_layout_and_shows_every_other_control() -> None:
    assert xml_text("tab\tnewline\n é 中 🙂") == "tab\tnewline\n é 中 🙂"
    # XML allows a carriage return, DEL, C1 and bidi controls, but a reader should not get them raw
    assert xml_text("\x01\x1f\x7f\x9b\ufffe\r\u202e") == "\\x01\\x1f\\x7f\\x9b\\ufffe\\r\\u202e"


def test_csv_quotes_and_defuses_formulas(reports: list[Report]) -> None:
    rows = list(csv.DictReader(io.StringIO(render("csv", [hostile(reports[0]), reports[1]]))))
    assert list(rows[0])[:3] == ["candidate", "path", "verdict"]
    assert rows[0]["path"] == "cand,=1|x\\n.py" and rows[0]["verdict"] == "failed"  # one line: no reader starts a row in it
    assert rows[0]["candidate"] == "cand,=1|x\\n"
    assert rows[0]["bugs"] == "scale-by-dk batch-transpose"
    top = f"{reports[1].max_score:g}"
    assert [rows[1][k] for k in ("path", "verdict", "total", "maximum")] == [reports[1].path, "passed", top, top]
    evil = replace(reports[1], path="=HYPERLINK(\"http://x\")")
    again = next(csv.DictReader(io.StringIO(render("csv", [evil]))))
    assert again["path"] == "'=HYPERLINK(\"http://x\")"


def test_github_escaping() -> None:
    assert escape_data("100% done\r\nnext") == "100%25 done%0D%0Anext"
    assert escape_property("a:b,c%\n") == "a%3Ab%2Cc%25%0A"


def test_github_annotation_per_diagnosis(reports: list[Report]) -> None:
    lines = annotation_lines(hostile(reports[0]))
    assert len(lines) == len(reports[0].diagnoses)
    assert lines[0].startswith("::error file=sub%2Cdir/a%3Ab.py,line=7,title=Scores divided by d_k instead of sqrt(d_k)::The scores are divided by d_k")
    assert "%0AMeasured: nul\\x00 esc\\x1b[31m" in lines[0]
    assert "\n" not in "".join(lines)
    assert all(line.startswith("::error file=") for line in lines)
    # a line exactly where the diagnosis has a location
    assert [",line=" in line for line in lines] == [d.location is not None for d in hostile(reports[0]).diagnoses]


def test_github_warning_and_not_graded() -> None:
    warning = Diagnosis("W701", "reduced-precision", "warning", "float32 result", "f", location=Location("d/s.py", 3, "x"))
    base = Report("d/s.py", "attention", "s", True, 1, 1, (), (warning,), replace_output(), 0.1, "completed")
    assert annotation_lines(base) == [
        f"::warning file=d/s.py,line=3,title=Computed in reduced precision::{BY_NAME['reduced-precision'].summary}%0AFix: f%0ACode: line 3: x%0AMeasured: float32 result"
        "%0AW701 reduced-precision: grade explain W701"
    ]
    missing = replace(base, diagnoses=(), error="2 files define attention()")
    assert annotation_lines(missing) == ["::error file=d/s.py,title=Not graded::2 files define attention()"]


def replace_output():  # type: ignore[no-untyped-def]
    from grader.observation import CapturedOutput

    return CapturedOutput("", 0, 0)


def test_markdown_table_cannot_be_broken(reports: list[Report]) -> None:
    text = render("markdown", [hostile(reports[0]), reports[1]])
    rows = [line for line in text.splitlines() if line.startswith("| ")]
    header_cells = rows[0].count("|")
    for row in rows:
        assert row.replace("\\|", "").count("|") == header_cells, row
    assert "<tag>" not in text and "\\<tag\\>" in text
    assert "## Attention grader: 1 of 2 passed" in text


def test_markdown_code_span_fence_outgrows_backticks() -> None:
    from grader.report.markdown import md_code

    assert md_code("np.sqrt(d_k)") == "`np.sqrt(d_k)`"
    assert md_code("use `K.T` <b>") == "``use `K.T` <b>``"
    assert md_code("`x`") == "`` `x` ``"


def test_gradescope_results(reports: list[Report]) -> None:
    doc = json.loads(render("gradescope", reports[:1]))
    assert doc["score"] == reports[0].score
    assert [t["name"].split(":")[0] for t in doc["tests"]] == [c.id for c in reports[0].checks]
    for test, check in zip(doc["tests"], reports[0].checks):
        assert set(test) == {"name", "score", "max_score", "status", "output"}  # reviewer: Gradescope's default visibility
        assert test["status"] == ("passed" if check.passed else "failed")
        assert test["max_score"] == check.max_points
    assert doc["stdout_visibility"] == "hidden"  # the reviewer's report on stdout is not for students
    with pytest.raises(UsageError, match="describes one submission, and 2 were given"):
        render("gradescope", reports)  # different candidates' points are never added up


def test_text_summary_table(reports: list[Report]) -> None:
    text = render("text", reports)
    assert "1 passed, 2 failed, 0 not graded of 3 submissions" in text
    assert "most frequent diagnoses" in text and "slowest submissions" in text


def test_quiet_text_is_one_line_each(reports: list[Report]) -> None:
    stream = io.StringIO()
    reporter = make_reporter("text", stream, replace(INFO, quiet=True))
    reporter.add(reports[0])
    first = reports[0]
    assert stream.getvalue().strip().splitlines() == [f"FAILED  {first.path}  {first.score:g}/{first.max_score:g}  scale-by-dk, batch-transpose"]


def test_report_files_are_never_half_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    from grader.errors import OutputError
    from grader.report.files import write_report_file

    target = tmp_path / "report.xml"
    target.write_text("the previous report")

    def disk_full(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", disk_full)
    with pytest.raises(OutputError, match="report.xml: no space left on the device"):
        write_report_file(target, "<testsuites/>" * 1000)
    assert target.read_text() == "the previous report"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.xml"]  # no temporary file left


@pytest.mark.parametrize(
    ("fix", "code"),
    [
        ("scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(d_k)", True),
        ("return weights @ V", True),
        ("e = np.exp(x); weights = e / e.sum(axis=-1, keepdims=True)", True),
        ("weights = softmax(scores, axis=-1)   # over the keys", True),
        ("Remove endless loops and use vectorised numpy.", False),
        ("Swap only the last two axes: np.swapaxes(K, -1, -2), right for any number of leading axes.", False),
        ("Return the numpy array `weights @ V`, of shape (..., T_q, d_v).", False),
    ],
)
def test_a_fix_is_shown_as_code_only_when_it_is_code(fix: str, code: bool) -> None:
    assert is_code(fix) is code
    shown = md_fix(fix)
    assert shown.startswith("`") is code
    if "`" in fix and not code:
        assert "`weights @ V`" in shown and "Return the numpy array" in shown


@pytest.mark.parametrize("fmt", ["markdown", "html"])
def test_a_run_that_stopped_short_says_so(reports: list[Report], fmt: str) -> None:
    """An interrupted run (Ctrl-C): its reports are complete documents of what was graded, and
    say how many of how many."""
    short = render_document(fmt, reports[:1], replace(INFO, expected=3))  # type: ignore[arg-type]
    assert "interrupted: 1 of 3 graded" in short
    assert "interrupted" not in render_document(fmt, reports, replace(INFO, expected=3))  # type: ignore[arg-type]
    assert "interrupted" not in render_document(fmt, reports[:1], INFO)  # type: ignore[arg-type]  # no expectation: a merge, an API call
