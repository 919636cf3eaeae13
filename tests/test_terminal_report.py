"""The terminal report as a reader sees it, rendered into a fixed-size console: the seed's two
bugs fit a 100 x 30 terminal, most important first; -v has every figure; a batch ends with its
table in the order given; -q prints in that order too; no progress bar is left in the report."""

from __future__ import annotations

import io
import os
import pty
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console

from conftest import EXAMPLES, ROOT
from grader.cli import cli
from grader.diagnosis.registry import BY_NAME
from grader.report.base import RunInfo
from grader.report.files import render_document
from grader.report.model import Report
from grader.report.summary import Row
from grader.report.text import TextReporter, one_line

INFO = RunInfo("attention-default", 16.0)
WIDTH, HEIGHT = 100, 30


def shown(reports: list[Report], info: RunInfo = INFO, width: int = WIDTH) -> tuple[str, TextReporter]:
    """What the text reporter prints for ``reports`` on a terminal ``width`` columns wide."""
    console = Console(file=io.StringIO(), width=width, color_system=None, highlight=False, emoji=False)
    reporter = TextReporter(console, info)
    for report in reports:
        reporter.add(report)
    reporter.finish()
    return console.file.getvalue(), reporter  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def seed(grade_path) -> Report:  # type: ignore[no-untyped-def]
    return grade_path(EXAMPLES / "seed_buggy.py")


def test_the_seeds_report_fits_a_100_by_30_terminal(seed: Report) -> None:
    out, _ = shown([seed])
    lines = out.splitlines()
    assert len(lines) <= HEIGHT and all(len(line) <= WIDTH for line in lines), out


def test_most_important_first(seed: Report) -> None:
    out, _ = shown([seed])
    lines = out.splitlines()
    assert lines[0].startswith("FAILED  ") and "5/16 points" in lines[0] and "2 bugs named" in lines[0]

    def at(text: str) -> int:
        return next(i for i, line in enumerate(lines) if text in line)

    # Each bug: its code and name in plain words, its file:line with the code, its fix.
    for d in seed.errors:
        assert d.location is not None
        head = at(f"{d.code} {d.name}")
        assert BY_NAME[d.name].title in lines[head]
        assert f"seed_buggy.py:{d.location.line}  {d.location.code}" in lines[head + 1]
        assert lines[head + 2].split() [0] == "fix" and d.fix[:40] in lines[head + 2]
    # The heat map below the bug it supports (the scale), before the next bug.
    assert at("S201 scale-by-dk") < at("weights of head64/identity") < at("T301 batch-transpose")
    # Then the failed checks, one line each, naming the bugs behind them; the passed ones in one line.
    failed = [c for c in seed.checks if not c.passed]
    rows = [line for line in lines if line.startswith("FAIL  ")]
    assert [row.split()[1] for row in rows] == [c.id for c in failed]
    assert all(row.rstrip().endswith("(S201, T301)") for row in rows)
    assert at("T301 batch-transpose") < at("FAIL  weights")
    passed = [c.id for c in seed.checks if c.passed]
    assert lines[at("PASS  ")].rstrip() == f"PASS  {len(passed)} checks passed: {', '.join(passed)}"
    # No figure without -v: no mismatch statistics, measured message, why-text or sandbox details.
    assert "max abs diff" not in out and "expected" not in out and "effective scale" not in out
    assert BY_NAME["scale-by-dk"].why[:40] not in out and "sandbox" not in out


def test_verbose_shows_every_figure_shown_before(seed: Report) -> None:
    out, _ = shown([seed], replace(INFO, verbose=True), width=400)  # wide: each text on one line
    for check in seed.checks:
        assert check.summary in out, check.id  # the mismatch statistics: got, expected, worst element
    for d in seed.diagnoses:
        assert d.message in out and BY_NAME[d.name].why in out and d.fix in out
    assert "network, filesystem and process isolated" in out
    assert "weights of head64/identity" in out and out.index("S201 scale-by-dk") < out.index("weights of") < out.index("T301")


def test_a_passing_submission_is_its_verdict_and_the_checks_passed(grade_path) -> None:  # type: ignore[no-untyped-def]
    report = grade_path(EXAMPLES / "correct.py")
    lines = [line for line in shown([report])[0].splitlines() if line.strip()]
    assert lines[0].startswith("PASSED  ") and lines[1].startswith(f"PASS  {len(report.checks)} checks passed: load, shape")
    assert len(lines) <= 3  # the names of the checks wrap under PASS, none cut off
    assert all(c.id in " ".join(lines[1:]).replace(",", " ").split() for c in report.checks)


def test_skipped_checks_fold_by_reason(grade_path) -> None:  # type: ignore[no-untyped-def]
    report = grade_path(EXAMPLES / "load_error.py")
    lines = shown([report])[0].splitlines()
    skip = [line for line in lines if line.startswith("SKIP  ")]
    assert len(skip) == 1 and skip[0].startswith(f"SKIP  {len(report.checks) - 1} checks skipped (the submission did not load): shape, weights")
    assert any(line.startswith("FAIL  load  0/1  importing the file raised ModuleNotFoundError") for line in lines)


def test_a_batch_ends_with_its_table_in_the_order_given(grade_path) -> None:  # type: ignore[no-untyped-def]
    names = ("seed_buggy.py", "correct.py", "load_error.py")
    reports = [grade_path(EXAMPLES / name) for name in names]
    out, reporter = shown(reports)
    assert all(isinstance(row, Row) for row in reporter.rows) and not hasattr(reporter, "reports")  # Rows, not Reports
    lines = out.splitlines()
    start = lines.index(next(line for line in lines if line.startswith("submissions")))
    assert lines[start + 1].split() == ["candidate", "verdict", "score", "bugs", "named", "time"]
    table = lines[start + 2 : start + 2 + len(names)]
    assert [line.split()[:3] for line in table] == [["seed_buggy", "failed", "5/16"], ["correct", "passed", "16/16"], ["load_error", "failed", "0/16"]]
    assert "scale-by-dk, batch-transpose" in table[0] and "load-error" in table[2]
    # The reports above it in the same order, the summary after it.
    assert [line.split()[1] for line in lines if re.match(r"(PASSED|FAILED)  ", line)] == [str(r.path) for r in reports]
    assert out.index("1 passed, 2 failed, 0 not graded of 3 submissions") > start


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), env={"GITHUB_ACTIONS": None, "CI": "true"})  # type: ignore[dict-item]
    return result.exit_code, result.stdout, result.stderr


def test_quiet_prints_in_the_order_given_whatever_finishes_first() -> None:
    # The first runs out of its second while the others take a fraction of it: it finishes last.
    paths = [str(EXAMPLES / name) for name in ("timeout.py", "correct.py", "seed_buggy.py")]
    code, out, err = invoke("-q", "-j", "3", "--timeout", "1", "--no-cache", *paths)
    assert code == 1, err
    lines = out.splitlines()
    assert [line.split()[1] for line in lines[:3]] == paths
    assert lines[0].startswith("FAILED  ") and lines[0].endswith("timeout") and lines[1].startswith("PASSED  ")
    assert "1 passed, 2 failed, 0 not graded of 3 submissions" in out
    assert not any(line.startswith("candidate ") for line in lines)  # the lines are the table already


def test_gradescope_with_more_than_one_submission_is_a_usage_error(tmp_path) -> None:  # type: ignore[no-untyped-def]
    two = [str(EXAMPLES / "correct.py"), str(EXAMPLES / "seed_buggy.py")]
    for args in (["--format", "gradescope"], ["-o", f"gradescope={tmp_path / 'results.json'}"]):
        code, out, err = invoke(*args, *two)
        assert code == 2 and out == ""
        assert err.splitlines() == ["grade: error: gradescope: results.json describes one submission, and 2 were found; grade each submission in its own run"]
    assert not (tmp_path / "results.json").exists()
    code, out, _ = invoke("--format", "gradescope", "--audience", "candidate", two[1])
    assert code == 1 and '"stdout_visibility": "visible"' in out


def on_a_terminal(*args: str) -> str:
    """What `grade ARGS` writes to a real terminal (a pseudo-terminal 100 columns wide)."""
    leader, follower = pty.openpty()
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "GITHUB_ACTIONS")}
    env.update(PYTHONPATH=str(ROOT), COLUMNS=str(WIDTH), LINES=str(HEIGHT), TERM="xterm-256color")
    proc = subprocess.Popen([sys.executable, "-m", "grader", "--no-cache", *args], stdin=subprocess.DEVNULL, stdout=follower, stderr=follower, env=env, cwd=ROOT)
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the terminal closed: the process is done
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    proc.wait(timeout=120)
    return b"".join(chunks).decode("utf-8", "replace")


def segments(raw: str) -> list[str]:
    """The terminal's text between line starts (a carriage return starts one too), escapes removed."""
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07", "", raw)
    return re.split(r"\r\n|\r|\n", plain)


def test_one_submission_shows_no_progress_bar() -> None:
    raw = on_a_terminal(str(EXAMPLES / "seed_buggy.py"))
    text = [s for s in segments(raw) if s.strip()]
    assert text[0].startswith("FAILED  ") and "grading" not in raw


def test_a_batch_bar_never_shares_a_line_with_the_report() -> None:
    raw = on_a_terminal(str(EXAMPLES / "correct.py"), str(EXAMPLES / "seed_buggy.py"))
    lines = segments(raw)
    verdicts = [line for line in lines if re.search(r"(PASSED|FAILED)  ", line)]
    assert len(verdicts) == 2 and all(re.match(r"(PASSED|FAILED)  ", line) for line in verdicts), verdicts
    assert any(line.split()[:2] == ["candidate", "verdict"] for line in lines) and any("1 passed, 1 failed" in line for line in lines)


def test_a_submission_not_graded_says_so_on_its_verdict_line(grade_path) -> None:  # type: ignore[no-untyped-def]
    """As the batch's summary says it: NOT GRADED, never FAILED, in full and in the -q line."""
    report = replace(grade_path(EXAMPLES / "correct.py"), passed=False, score=0.0, checks=(), diagnoses=(), error="no file defines attention() at module level")
    full = shown([report])[0].splitlines()
    console = Console(file=io.StringIO(), width=WIDTH, color_system=None)
    console.print(one_line(report))
    assert full[0].startswith("NOT GRADED  ") and console.file.getvalue().startswith("NOT GRADED  ")  # type: ignore[attr-defined]
    assert "| ⚠️ not graded |" in render_document("markdown", [report], INFO)


def test_checks_with_no_result_say_why_not_how_many_comparisons_failed() -> None:
    done = subprocess.run([sys.executable, "-m", "grader", "--no-cache", "--timeout", "1", str(EXAMPLES / "timeout.py")], cwd=ROOT, capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "120"})
    lines = [line for line in done.stdout.splitlines() if line.startswith("FAIL ")]
    assert lines and all("no result: the submission ran out of time" in line and "comparisons fail" not in line for line in lines), done.stdout


def test_piped_the_report_is_laid_out_at_the_width_of_a_file_report(tmp_path: Path) -> None:
    """In a CI log (stdout no terminal, no $COLUMNS) a verdict line of about 90 characters does
    not wrap at rich's default of 80."""
    folder = tmp_path / ("a" * 31)
    folder.mkdir()
    (folder / "seed_buggy.py").write_text((EXAMPLES / "seed_buggy.py").read_text())
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    done = subprocess.run([sys.executable, "-m", "grader", "--no-cache", f"{folder.name}/seed_buggy.py"], cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env)
    first = done.stdout.splitlines()[0]
    assert len(first.rstrip()) > 80 and first.startswith("FAILED") and first.rstrip().endswith(" s"), done.stdout


def test_the_files_passed_over_are_said_under_the_verdict(grade_path) -> None:  # type: ignore[no-untyped-def]
    report = grade_path(EXAMPLES / "seed_buggy.py")
    with_others = replace(report, extra={**report.extra, "candidate": "alice", "also_defined_in": ["solution.py"]})
    lines = shown([with_others])[0].splitlines()
    assert "also defined in solution.py: not graded" in lines[1]
    assert "also defined" not in shown([report])[0]


def test_quiet_ends_with_the_counts_alone(grade_path) -> None:  # type: ignore[no-untyped-def]
    """-q: one line per submission and the verdict counts, as the README says; no tables."""
    reports = [grade_path(EXAMPLES / name) for name in ("seed_buggy.py", "correct.py")]
    quiet = shown(reports, replace(INFO, quiet=True))[0]
    assert quiet.splitlines()[-1].startswith("1 passed, 1 failed, 0 not graded of 2 submissions")
    assert "most frequent diagnoses" not in quiet and "most frequent diagnoses" in shown(reports)[0]
