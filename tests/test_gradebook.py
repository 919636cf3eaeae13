"""The CSV gradebook read back with csv.DictReader: a candidate column, points per check that sum
to the total, and a roster joined in, with neither a candidate missing from the roster nor a
roster row without a submission dropped. Bad rosters are one line and exit 2, before grading."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import EXAMPLES
from grader.cli import cli
from grader.errors import UsageError
from grader.report.csvfmt import RESERVED
from grader.report.roster import parse_roster

EXAMPLES_GRADED = ("seed_buggy.py", "correct.py", "load_error.py")


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), env={"GITHUB_ACTIONS": None, "CI": "true"})  # type: ignore[dict-item]
    return result.exit_code, result.stdout, result.stderr


def gradebook(*args: str) -> list[dict[str, str]]:
    code, out, err = invoke("--format", "csv", *args, *(str(EXAMPLES / name) for name in EXAMPLES_GRADED))
    assert code == 1, err  # seed_buggy and load_error fail
    assert out.startswith('"candidate",')
    return list(csv.DictReader(io.StringIO(out)))


@pytest.fixture(scope="module")
def plain() -> list[dict[str, str]]:
    return gradebook()


def points_columns(row: dict[str, str]) -> list[str]:
    return [key for key in row if key.startswith("points:")]


def test_columns_in_order_and_one_row_per_submission(plain: list[dict[str, str]]) -> None:
    header = list(plain[0])
    checks = points_columns(plain[0])
    assert header == ["candidate", "path", "verdict", *checks, "total", "maximum", "bugs", "duration_s", "error"]
    assert checks[:3] == ["points:load", "points:shape", "points:weights"]  # the suite's order
    assert [r["candidate"] for r in plain] == ["seed_buggy", "correct", "load_error"]
    assert [r["verdict"] for r in plain] == ["failed", "passed", "failed"]
    assert plain[0]["bugs"] == "scale-by-dk batch-transpose"
    assert plain[2]["bugs"] == "load-error"
    assert plain[1]["bugs"] == "" and plain[1]["error"] == ""
    assert len({r["maximum"] for r in plain}) == 1
    assert all(float(r["duration_s"]) >= 0 for r in plain)


def test_points_per_check_sum_to_the_total(plain: list[dict[str, str]]) -> None:
    for row in plain:
        points = [float(row[key]) for key in points_columns(row) if row[key] != ""]
        assert sum(points) == pytest.approx(float(row["total"])), row["candidate"]
    assert plain[1]["total"] == plain[1]["maximum"]
    assert plain[0]["points:weights"] == "0" and plain[0]["points:load"] == "1"


def test_roster_joined_missing_candidates_and_rows_without_submission_listed(tmp_path: Path) -> None:
    roster = tmp_path / "roster.csv"
    # The id is the column named candidate, wherever it is; a value that a spreadsheet would
    # take as a formula is defused like any other cell.
    roster.write_text(
        "name,Candidate,email\n"
        "Ada Lovelace,seed_buggy,ada@example.org\n"
        "Alan Turing,correct,alan@example.org\n"
        '"=HYPERLINK(""http://x"")",ghost,ghost@example.org\n',
        encoding="utf-8",
    )
    rows = gradebook("--roster", str(roster))
    assert list(rows[0])[:6] == ["candidate", "name", "email", "roster", "path", "verdict"]
    by = {r["candidate"]: r for r in rows}
    assert [r["candidate"] for r in rows] == ["seed_buggy", "correct", "load_error", "ghost"]
    assert by["seed_buggy"]["name"] == "Ada Lovelace" and by["seed_buggy"]["roster"] == "listed"
    assert by["correct"]["email"] == "alan@example.org" and by["correct"]["verdict"] == "passed"
    # graded but not in the roster: kept, flagged, empty roster columns
    assert by["load_error"]["roster"] == "missing" and by["load_error"]["name"] == "" and by["load_error"]["verdict"] == "failed"
    # in the roster but never submitted: listed, with no points
    ghost = by["ghost"]
    assert ghost["verdict"] == "no submission" and ghost["roster"] == "listed" and ghost["path"] == ""
    assert ghost["total"] == "" and ghost["maximum"] == by["correct"]["maximum"] and all(ghost[k] == "" for k in points_columns(ghost))
    assert ghost["name"] == "'=HYPERLINK(\"http://x\")"


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        (None, "no such file"),
        (b"", "empty"),
        (b"candidate,name\nalice,A\nbob,B\nalice,C\n", "line 4: the candidate id 'alice' is also on line 2"),
        (b"candidate,name\nal\xffice,A\n", "line 2: not UTF-8"),
        (b"candidate,name\nalice,A,extra\n", "line 2: 3 fields where the header has 2"),
        (b"candidate,total\nalice,3\n", "the column 'total' is one the gradebook writes itself"),
        (b"candidate,,email\nalice,x,y\n", "column 2 of the header has no name"),
        (b"id,name\n,Nobody\n", "line 2: no candidate id"),
    ],
    ids=["missing", "empty", "duplicate-id", "not-utf8", "field-count", "reserved-column", "unnamed-column", "empty-id"],
)
def test_bad_roster_is_one_line_exit_2_before_grading(tmp_path: Path, content: bytes | None, fragment: str) -> None:
    roster = tmp_path / "roster.csv"
    if content is not None:
        roster.write_bytes(content)
    code, out, err = invoke("--format", "csv", "--roster", str(roster), str(EXAMPLES / "correct.py"))
    assert code == 2
    assert out == ""  # nothing graded, no gradebook
    assert err.count("\n") == 1 and err.startswith(f"grade: error: --roster {roster}: ") and fragment in err, err


def test_roster_without_a_gradebook_is_a_usage_error(tmp_path: Path) -> None:
    roster = tmp_path / "roster.csv"
    roster.write_text("candidate\ncorrect\n")
    code, out, err = invoke("--roster", str(roster), str(EXAMPLES / "correct.py"))
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "--roster" in err and "csv" in err


def test_roster_reading_rules() -> None:
    # a spreadsheet's byte-order mark, an "ID" column, blank lines, a quoted line break
    roster = parse_roster('\ufeffName,ID\r\n\r\n"Multi\nline",s1\r\nB,s2\r\n', "r.csv", RESERVED)
    assert roster.id_column == "ID" and roster.columns == ("Name",)
    assert roster.rows == (("s1", ("Multi\nline",)), ("s2", ("B",)))
    # neither candidate nor id: the first column is the id
    assert parse_roster("student,mail\nx,y\n", "r.csv").rows == (("x", ("y",)),)
    with pytest.raises(UsageError, match="appears twice"):
        parse_roster("candidate,Name,name\n", "r.csv")
    with pytest.raises(UsageError, match="points:weights"):
        parse_roster("candidate,points:weights\n", "r.csv", RESERVED)


# 30,000 columns and a repeated one at the end: 25 s when each name was compared with all before it.
WIDE_ROSTER_CHILD = """
from grader.report.roster import parse_roster
names = ",".join(f"c{i}" for i in range(30_000))
print(len(parse_roster("candidate," + names + "\\nx" + ",v" * 30_000 + "\\n", "r.csv").columns))
try:
    parse_roster("candidate," + names + ",C0\\n", "r.csv")
except Exception as exc:
    print(exc)
"""


def test_a_wide_roster_header_is_checked_in_one_pass() -> None:
    import subprocess
    import sys

    from conftest import ROOT

    done = subprocess.run([sys.executable, "-c", WIDE_ROSTER_CHILD], capture_output=True, text=True, timeout=10, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["30000", "--roster r.csv: line 1: the column 'C0' appears twice in the header"]
