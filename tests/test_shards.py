"""--shard I/N and `grade merge`: one run over a folder and the merge of its three shards give
the same gradebook and the same JSON report; slices are balanced and do not depend on the order
of discovery; a merge of reports that are not shards of one run is refused with one line."""

from __future__ import annotations

import csv
import io
import json
import random
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from conftest import EXAMPLES
from grader.cli import cli
from grader.report.base import FORMATS, RunInfo
from grader.report.files import render_document
from grader.report.jsonfmt import JsonReporter
from grader.report.jsonload import Merge
from grader.report.model import Report
from grader.shard import Shard

# Nine submissions whose verdicts do not depend on the fresh inputs a run draws.
EXAMPLE_NAMES = ("correct.py", "seed_fixed.py", "seed_buggy.py", "no_scale.py", "batch_transpose.py", "load_error.py", "crash.py", "bad_return.py", "function_missing.py")


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["--no-cache", *args] if args[0] != "merge" else list(args), env={"GITHUB_ACTIONS": None, "CI": "true"})  # type: ignore[dict-item]
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("shards") / "subs"
    root.mkdir()
    for number, name in enumerate(EXAMPLE_NAMES):
        shutil.copy(EXAMPLES / name, root / f"{'ZYXWVUTSR'[number]}_{name}")  # discovery order is not name order
    return root


@pytest.fixture(scope="module")
def runs(folder: Path) -> dict[str, Path]:
    """One run over the folder, its three shards, and their merge: JSON and CSV of each."""
    out = folder.parent
    code, _, err = invoke("-q", "--jobs", "2", "-o", f"json={out / 'one.json'}", "-o", f"csv={out / 'one.csv'}", str(folder))
    assert code == 1, err
    for i in (1, 2, 3):
        code, _, err = invoke("-q", "--jobs", "2", "--shard", f"{i}/3", "-o", f"json={out / f'shard{i}.json'}", str(folder))
        assert code in (0, 1), err
    shards = [str(out / f"shard{i}.json") for i in (3, 1, 2)]  # in any order
    code, _, err = invoke("merge", "-q", *shards, "-o", f"json={out / 'merged.json'}", "-o", f"csv={out / 'merged.csv'}")
    assert code == 1 and err == "", err
    return {name: out / name for name in ("one.json", "one.csv", "merged.json", "merged.csv", "shard1.json", "shard2.json", "shard3.json")}


def timeless(value: Any) -> Any:
    """A JSON report without what differs from run to run: timings, the sandbox's per-worker
    details (keyring serials, work folders) and the fresh check's inputs, drawn anew each run."""
    if isinstance(value, dict):
        if value.get("kind") == "fresh":
            return {k: v for k, v in value.items() if k in ("id", "passed", "outcome", "points", "max_points")}
        return {k: timeless(v) for k, v in value.items() if k not in ("duration_s", "detail")}
    if isinstance(value, list):
        return [timeless(v) for v in value]
    return value


def gradebook(path: Path) -> list[dict[str, str]]:
    return [{k: v for k, v in row.items() if k != "duration_s"} for row in csv.DictReader(io.StringIO(path.read_text()))]


def test_three_merged_shards_give_the_gradebook_and_the_json_of_one_run(runs: dict[str, Path]) -> None:
    one, merged = gradebook(runs["one.csv"]), gradebook(runs["merged.csv"])
    assert len(one) == 9 and merged == one
    assert [r["verdict"] for r in one].count("passed") == 2
    a, b = json.loads(runs["one.json"].read_text()), json.loads(runs["merged.json"].read_text())
    assert b["run"] == a["run"] == {"discovered": 9, "shard": None}
    assert [s["extra"]["index"] for s in b["submissions"]] == list(range(9))
    assert timeless(b) == timeless(a)


def test_each_shard_holds_a_balanced_slice_and_says_which(runs: dict[str, Path]) -> None:
    paths: list[str] = []
    for i in (1, 2, 3):
        doc = json.loads(runs[f"shard{i}.json"].read_text())
        assert doc["run"] == {"discovered": 9, "shard": f"{i}/3"}
        assert len(doc["submissions"]) == 3
        indexes = [s["extra"]["index"] for s in doc["submissions"]]
        assert indexes == sorted(indexes)  # in discovery order within the slice
        paths += [s["path"] for s in doc["submissions"]]
    assert sorted(paths) == sorted(s["path"] for s in json.loads(runs["one.json"].read_text())["submissions"])


@pytest.mark.parametrize("count", range(0, 23))
def test_slices_are_balanced_disjoint_and_cover_everything(count: int) -> None:
    labels = [f"subs/candidate_{n:02d}" for n in range(count)]
    for shards in range(1, 8):
        slices = [Shard(i, shards).select(labels) for i in range(1, shards + 1)]
        sizes = [len(s) for s in slices]
        assert max(sizes) - min(sizes) <= 1
        assert sorted(i for s in slices for i in s) == list(range(count))
        assert all(s == sorted(s) for s in slices)  # discovery order kept


def test_slices_do_not_depend_on_the_order_of_discovery() -> None:
    labels = [f"subs/{name}" for name in ("zed.py", "amy", "bob.py", "Carl", "dee.ipynb", "éva", "bob2.py", "x/y")]
    shuffled = labels[:]
    random.Random(7).shuffle(shuffled)
    for shards in (2, 3, 5):
        for i in range(1, shards + 1):
            shard = Shard(i, shards)
            assert {labels[k] for k in shard.select(labels)} == {shuffled[k] for k in shard.select(shuffled)}


def test_the_cli_shard_is_the_same_whatever_order_the_paths_come_in(folder: Path) -> None:
    files = sorted(folder.iterdir())
    picked = []
    for order in (files, files[::-1]):
        code, out, err = invoke("--format", "json", "--shard", "2/4", *map(str, order))
        assert code in (0, 1), err
        picked.append(sorted(s["path"] for s in json.loads(out)["submissions"]))
    assert picked[0] == picked[1] and len(picked[0]) in (2, 3)


@pytest.mark.parametrize("text", ["0/3", "4/3", "3", "a/b", "1/0", "-1/2", "1/3/4", "", "１/２", " 1/2", "1 /2"])
def test_a_bad_shard_is_a_usage_error(text: str) -> None:
    code, out, err = invoke("--shard", text, str(EXAMPLES / "correct.py"))
    assert code == 2 and out == "" and err.count("\n") == 1 and err.startswith("grade: error: --shard"), err


def test_every_format_merge_writes_round_trips_through_the_json(grade_path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Reports read back from a JSON report render every format as the reports themselves do
    (timings as the JSON keeps them: to 0.1 ms), heat maps included."""
    originals = [grade_path(EXAMPLES / name) for name in ("seed_buggy.py", "correct.py", "load_error.py", "batch_transpose.py")]
    originals = [_numbered(r, i) for i, r in enumerate(originals)]
    info = RunInfo(originals[0].suite, originals[0].max_score, discovered=len(originals), suite_fingerprint="x")
    path = tmp_path / "run.json"
    with path.open("w") as stream:
        reporter = JsonReporter(stream, info)
        for report in originals:
            reporter.add(report)
        reporter.finish()
    again = list(Merge.open([path]).reports())
    assert [r.path for r in again] == [r.path for r in originals]
    for fmt in FORMATS:
        pick = slice(0, 1) if fmt == "gradescope" else slice(None)  # one submission per results.json
        assert render_document(fmt, again[pick], info) == render_document(fmt, originals[pick], info), fmt  # type: ignore[arg-type]
    assert "weights of" in render_document("text", again[:1], info)  # the heat map came back


def _numbered(report: Report, index: int) -> Report:
    from dataclasses import replace

    return replace(report, duration_s=round(report.duration_s, 4), extra={**report.extra, "index": index})


# --------------------------------------------------------------------------------------------
# Refusals: one line on stderr, exit 2, no traceback, nothing written.


def edited(source: Path, target: Path, edit) -> Path:  # type: ignore[no-untyped-def]
    doc = json.loads(source.read_text())
    edit(doc)
    target.write_text(json.dumps(doc, indent=2))
    return target


def refused(*args: str, tmp_path: Path) -> str:
    out_file = tmp_path / "merged.csv"
    code, out, err = invoke("merge", *args, "-o", f"csv={out_file}")
    assert code == 2 and out == "" and err.count("\n") == 1 and err.startswith("grade: error: "), (code, err)
    assert "Traceback" not in err and not out_file.exists()
    return err


def test_merge_refuses_reports_of_different_suites_or_versions(runs: dict[str, Path], tmp_path: Path) -> None:
    s1, s2 = runs["shard1.json"], runs["shard2.json"]
    other = edited(s2, tmp_path / "other.json", lambda d: d["suite"].update(name="another-suite"))
    assert "different suites ('attention-default' and 'another-suite')" in refused(str(s1), str(other), tmp_path=tmp_path)
    changed = edited(s2, tmp_path / "changed.json", lambda d: d["suite"].update(fingerprint="0" * 64))
    assert "different versions of the suite" in refused(str(s1), str(changed), tmp_path=tmp_path)
    older = edited(s2, tmp_path / "older.json", lambda d: d["grader"].update(version="0.0.1"))
    assert "different grader versions" in refused(str(s1), str(older), tmp_path=tmp_path)
    assert "written by grader 0.0.1; this is grader" in refused(str(older), tmp_path=tmp_path)
    split = edited(s2, tmp_path / "split.json", lambda d: d["run"].update(shard="2/4"))
    assert "slices of different splits (--shard 1/3 and 2/4)" in refused(str(s1), str(split), tmp_path=tmp_path)
    bigger = edited(s2, tmp_path / "bigger.json", lambda d: d["run"].update(discovered=10))
    assert "come from different runs (9 and 10 submissions found)" in refused(str(s1), str(bigger), tmp_path=tmp_path)


def test_merge_refuses_a_submission_in_two_shards(runs: dict[str, Path], tmp_path: Path) -> None:
    copy = tmp_path / "copy.json"
    shutil.copy(runs["shard1.json"], copy)
    assert "(one submission in two shards)" in refused(str(runs["shard1.json"]), str(runs["shard2.json"]), str(copy), tmp_path=tmp_path)
    assert "given twice" in refused(str(runs["shard1.json"]), str(runs["shard1.json"]), tmp_path=tmp_path)
    # A whole run and one of its shards overlap too.
    assert "both hold the submission" in refused(str(runs["one.json"]), str(runs["shard3.json"]), tmp_path=tmp_path)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (lambda text: text[: len(text) // 2], "ends before the document does (a truncated file?)"),
        (lambda text: text[:-3], "ends before the document does"),
        (lambda text: "", "is empty: no JSON report in it"),
        (lambda text: "hello\n", "not a grader report"),
        (lambda text: "[1, 2]\n", "not a grader report"),
        (lambda text: '{"score": 1.0, "tests": []}\n', "not a grader report: no 'submissions' in it"),
        (lambda text: text + "{}", "more data after the document"),
        (lambda text: re.sub('"passed": (true|false)', '"passed": "yes"', text, count=1), "is not a valid report: field 'passed' has the wrong type"),
        (lambda text: re.sub(r'"index": (\d+)', r'"index": "\1"', text, count=1), "is not a valid report: no submission index"),
        (lambda text: text.replace('"grader": {', '"graded": {', 1), "not a grader report (no grader version in it)"),
        (lambda text: text.replace('"shard": "1/3"', '"shard": "first"', 1), "its shard 'first' is not I/N"),
        (lambda text: text.replace('"submissions": [', '"submissions": [\n  {"path": 1},', 1), "submission 1 is not a valid report"),
        (lambda text: text.replace('{\n  "grader"', '{\n  "x": [' * 20000 + "]" * 20000 + ',\n  "grader"', 1), "nested too deeply"),
    ],
    ids=["half", "last-bytes", "empty", "not-json", "a-list", "gradescope", "trailing", "bad-field", "bad-index", "no-version", "bad-shard", "bad-submission", "deep"],
)
def test_merge_refuses_a_file_that_is_not_a_whole_report(runs: dict[str, Path], tmp_path: Path, content, message: str) -> None:  # type: ignore[no-untyped-def]
    bad = tmp_path / "bad.json"
    bad.write_text(content(runs["shard1.json"].read_text()))
    err = refused(str(bad), tmp_path=tmp_path)
    assert err.startswith(f"grade: error: {bad}: ") and message in err, err


def test_merge_refuses_what_it_cannot_read(tmp_path: Path) -> None:
    assert "no such file" in refused(str(tmp_path / "missing.json"), tmp_path=tmp_path).lower()
    assert "is a folder" in refused(str(tmp_path), tmp_path=tmp_path)
    binary = tmp_path / "binary.json"
    binary.write_bytes(b"\xff\xfe{\x00")
    assert "not UTF-8 text" in refused(str(binary), tmp_path=tmp_path)
    code, _, err = invoke("merge")
    assert code == 2 and err.startswith("grade: error: no report given")


def test_a_missing_shard_is_reported_and_fails_the_merge(runs: dict[str, Path]) -> None:
    code, out, err = invoke("merge", "--format", "csv", str(runs["shard1.json"]), str(runs["shard3.json"]))
    assert code == 1
    assert err == "grade: warning: only 6 of the 9 submissions of the run are in the reports given (shards 1/3, 3/3): the others are missing\n"
    assert len(list(csv.reader(io.StringIO(out)))) == 7


def test_merge_takes_the_audience_the_roster_and_the_feedback_of_a_run(runs: dict[str, Path], tmp_path: Path) -> None:
    """The shards of a batch graded for reviewers, merged into what candidates get: no expected
    value anywhere, the roster joined into the gradebook, one feedback file per submission."""
    roster = tmp_path / "roster.csv"
    names = [Path(s["path"]).stem for s in json.loads(runs["one.json"].read_text())["submissions"]]
    roster.write_text("candidate,email\n" + "".join(f"{name},{name}@example.org\n" for name in [*names[:4], "nobody_submitted"]))
    shards = [str(runs[f"shard{i}.json"]) for i in (1, 2, 3)]
    out, feedback = tmp_path / "candidate.json", tmp_path / "feedback"
    code, _, err = invoke("merge", "-q", *shards, "--audience", "candidate", "--roster", str(roster), "--feedback", str(feedback), "-o", f"json={out}", "-o", f"csv={tmp_path / 'book.csv'}")
    assert code == 1 and err == "", err
    text = out.read_text()
    assert '"expected"' not in text and '"matrices"' not in text
    book = gradebook(tmp_path / "book.csv")
    assert {row["candidate"] for row in book} >= {*names, "nobody_submitted"}
    assert sorted(p.suffix for p in feedback.iterdir()) == [".md"] * 9
    # Without a CSV gradebook a roster has nowhere to go: one line, exit 2, as for grade check.
    code, _, err = invoke("merge", "-q", *shards, "--roster", str(roster))
    assert code == 2 and "--roster" in err and "\n" == err[-1] and err.count("\n") == 1
