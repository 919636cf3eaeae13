"""The terminal report of a diagnosis: its location and the heat map, rendered without colour.
(The layout of the whole report, short and verbose, is in test_terminal_report.py.)"""

from __future__ import annotations

import io
import json
from dataclasses import replace

import numpy as np
from rich.console import Console

from conftest import EXAMPLES
from grader.report.heatmap import MAX_SIZE, matrix_text
from grader.report.jsonfmt import report_dict
from grader.report.text import check_table, render


def text_of(renderable: object, width: int = 100) -> str:
    console = Console(file=io.StringIO(), width=width, color_system=None)
    console.print(renderable)
    return console.file.getvalue()  # type: ignore[attr-defined]


def test_seed_report_shows_the_line_and_the_heat_map(grade_path) -> None:  # type: ignore[no-untyped-def]
    report = grade_path(EXAMPLES / "seed_buggy.py")
    out = text_of(render(report), width=300)  # wide: the location names the file by its full path
    assert "seed_buggy.py:12  scores = Q @ K.T / Q.shape[-1]" in out
    verbose = text_of(render(report, verbose=True), width=300)
    assert "Where     " in verbose and "line 12: scores = Q @ K.T / Q.shape[-1]" in verbose
    assert "weights of head64/identity" in out and "submission" in out and "reference" in out
    # Too flat: every one of the submission's 6 x 9 weights is in the faintest shade but one.
    rows = [line for line in out.splitlines() if line.startswith("  ░") or line.startswith("  ▒")]
    assert rows and rows[0].split()[0] == "░" * 18


def test_location_is_in_the_json_report(grade_path) -> None:  # type: ignore[no-untyped-def]
    report = grade_path(EXAMPLES / "seed_buggy.py")
    doc = json.loads(json.dumps(report_dict(report)))
    locations = {d["name"]: d["location"] for d in doc["diagnoses"]}
    assert locations["scale-by-dk"]["line"] == 12
    assert locations["batch-transpose"]["code"] == "scores = Q @ K.T / Q.shape[-1]"


def test_no_heat_map_without_a_weights_failure(grade_path) -> None:  # type: ignore[no-untyped-def]
    assert "weights of" not in text_of(render(grade_path(EXAMPLES / "correct.py")))


def test_heat_map_marks_and_bounds() -> None:
    big = np.full((30, 40), 1.0 / 40)
    big[0, 0] = np.nan
    big[1, 0] = -0.5
    big[2, 0] = 1.5
    big[3, 0] = 1.0
    lines = text_of(matrix_text(big)).splitlines()
    assert len(lines) == MAX_SIZE and all(len(line.rstrip()) <= 2 * MAX_SIZE for line in lines)
    assert lines[0].startswith("??") and lines[1].startswith("--") and lines[2].startswith("!!") and lines[3].startswith("██")


def test_a_report_served_from_the_cache_keeps_its_heat_map(grade_path) -> None:  # type: ignore[no-untyped-def]
    from grader.report.jsonfmt import report_from_dict

    report = grade_path(EXAMPLES / "seed_buggy.py")
    again = report_from_dict(json.loads(json.dumps(report_dict(report))), report.suite)
    assert "weights of head64/identity" in text_of(render(again), width=300)
    assert text_of(render(again), width=300).count("░") == text_of(render(report), width=300).count("░")


def test_check_lines_keep_their_columns_and_wrap_under_the_summary(grade_path) -> None:  # type: ignore[no-untyped-def]
    report = grade_path(EXAMPLES / "seed_buggy.py")
    lines = text_of(check_table(report), width=60).splitlines()
    weights = next(i for i, line in enumerate(lines) if line.split()[:2] == ["FAIL", "weights"])
    start = lines[weights].index(lines[weights].split()[3])  # where the summary column begins
    assert lines[weights].startswith("FAIL  weights") and "0/3" in lines[weights]
    assert lines[weights + 1][:start].strip() == "" and lines[weights + 1][start] != " "  # wrapped under itself
    assert all(len(line.rstrip()) <= 60 for line in lines)
    assert [line.split()[1] for line in lines if line[:4] in ("PASS", "FAIL", "SKIP", "ERR ")] == [c.id for c in report.checks]


def test_a_word_longer_than_the_summary_column_is_folded_not_cut(grade_path) -> None:  # type: ignore[no-untyped-def]
    report = grade_path(EXAMPLES / "seed_buggy.py")
    long = "x" * 80
    checks = (replace(report.checks[0], summary=f"loaded {long} here"),)
    out = text_of(check_table(replace(report, checks=checks)), width=50)
    assert "".join(part.strip() for part in out.split()[3:]).count("x") == 80


def test_control_characters_from_the_submission_are_shown_not_sent(grade_path) -> None:  # type: ignore[no-untyped-def]
    report = grade_path(EXAMPLES / "seed_buggy.py")
    hostile = "a\x1b]0;owned\x07b\x1b[2Jc\x00d"
    checks = (replace(report.checks[0], summary=hostile), *report.checks[1:])
    bad = replace(report, path=f"x{hostile}.py", checks=checks, output=replace(report.output, text=f"{hostile}\n\tnext", total_bytes=30))
    out = text_of(render(bad, verbose=True), width=300)  # verbose: the passed check's summary too
    assert "\x1b" not in out and "\x07" not in out and "\x00" not in out
    assert out.count("a\\x1b]0;owned\\x07b\\x1b[2Jc\\x00d") == 3  # the path, the check's summary, the output
    assert "\tnext" not in out and "next" in out  # a tab is layout: expanded, not escaped


def test_a_narrow_terminal_crops_the_heat_map_rather_than_folding_it(grade_path) -> None:  # type: ignore[no-untyped-def]
    report = grade_path(EXAMPLES / "seed_buggy.py")
    def rows(width: int) -> list[str]:
        return [line for line in text_of(render(report), width=width).splitlines() if line.startswith("  ░")]

    assert len(rows(30)) == len(rows(300)) == 6  # one line per query, however narrow
    assert all(len(line) <= 30 for line in rows(30))
    assert all(set(line.strip()) <= set("░▒▓█ ") for line in rows(30))  # cut, never folded or marked with "…"
