"""Batch grading from the command line: a folder of good, buggy and broken submissions graded in
parallel, every report format written and parsed, the cache, output errors, Ctrl-C.

Every hostile submission here stops by itself (a loop of at most 30 s, a crash), and the grader's
time limit is short, so the batch is quick and bounded.
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import EXAMPLES, ROOT
from grader.cli import cli
from test_worker import HOSTILE

HANG = "import time\n\ndef attention(Q, K, V):\n    started = time.monotonic()\n    while time.monotonic() - started < 30:\n        pass\n"
FORMATS = ("json", "junit", "csv", "markdown", "github", "text")  # gradescope: one submission a run (test_terminal_report)


def invoke(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), env={"GITHUB_ACTIONS": None, "CI": "true", **(env or {})})  # type: ignore[dict-item]
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("batch")
    for name in ("correct.py", "seed_buggy.py", "load_error.py"):
        shutil.copy(EXAMPLES / name, root / name)
    shutil.copy(HOSTILE / "segfault.py", root / "segfault.py")
    (root / "hang.py").write_text(HANG)
    (root / "alice").mkdir()
    shutil.copy(EXAMPLES / "correct.py", root / "alice" / "attention.py")
    (root / "alice" / "demo.py").write_text("from attention import attention\n")
    (root / "bob").mkdir()
    for name in ("one.py", "two.py"):
        shutil.copy(EXAMPLES / "correct.py", root / "bob" / name)
    return root


def by_name(doc: dict) -> dict[str, dict]:  # type: ignore[type-arg]
    return {Path(s["path"]).name if not s.get("extra", {}).get("candidate") else Path(s["extra"]["candidate"]).name: s for s in doc["submissions"]}


def test_batch_grades_everything_in_parallel_and_writes_every_format(folder: Path, tmp_path: Path) -> None:
    outputs = [f"{fmt}={tmp_path / ('report.' + fmt)}" for fmt in FORMATS]
    args = ["--jobs", "2", "--timeout", "1", "--format", "json", "--cache-dir", str(tmp_path / "cache")]
    code, out, err = invoke(*args, *[x for o in outputs for x in ("-o", o)], str(folder))
    assert code == 1, err
    doc = json.loads(out)
    subs = by_name(doc)
    assert sorted(subs) == ["alice", "bob", "correct.py", "hang.py", "load_error.py", "seed_buggy.py", "segfault.py"]
    names = {key: sorted(d["name"] for d in s["diagnoses"]) for key, s in subs.items()}
    assert names == {
        "alice": [], "bob": [], "correct.py": [], "hang.py": ["timeout"], "load_error.py": ["load-error"],
        "seed_buggy.py": ["batch-transpose", "scale-by-dk"], "segfault.py": ["crash"],
    }
    assert [k for k, s in subs.items() if s["passed"]] == ["alice", "correct.py"] or sorted(k for k, s in subs.items() if s["passed"]) == ["alice", "correct.py"]
    assert subs["alice"]["path"].endswith("alice/attention.py")
    assert subs["bob"]["error"].startswith("2 files define attention(): one.py, two.py")
    assert doc["summary"] == {**doc["summary"], "total": 7, "passed": 2, "failed": 5}
    # The files: in the order of the submissions, each parseable by the usual tools.
    files = {fmt: (tmp_path / f"report.{fmt}").read_text() for fmt in FORMATS}
    assert json.loads(files["json"])["submissions"] == doc["submissions"]
    suites = ET.fromstring(files["junit"]).findall("testsuite")
    assert [s.get("name") for s in suites] == [s["path"] for s in doc["submissions"]]
    assert suites[1].find("testcase/error") is not None  # bob: not graded
    rows = list(csv.DictReader(io.StringIO(files["csv"])))
    assert [r["path"] for r in rows] == [s["path"] for s in doc["submissions"]]
    assert {r["verdict"] for r in rows} == {"passed", "failed", "not graded"}
    assert "## Attention grader: 2 of 7 passed" in files["markdown"]
    assert files["github"].count("::error ") == sum(len(s["diagnoses"]) for s in doc["submissions"]) + 1
    assert "2 passed, 4 failed, 1 not graded of 7 submissions" in files["text"]


def test_second_run_uses_the_cache_and_no_cache_ignores_it(folder: Path, tmp_path: Path) -> None:
    args = ["--jobs", "2", "--timeout", "1", "--format", "json", "--cache-dir", str(tmp_path / "cache"), str(folder)]
    first = json.loads(invoke(*args)[1])
    assert not any(s.get("extra", {}).get("cached") for s in first["submissions"])
    second = json.loads(invoke(*args)[1])
    cached = {k for k, s in by_name(second).items() if s.get("extra", {}).get("cached")}
    # A timeout depends on the machine's load and a not-graded candidate has no result: both again.
    assert cached == {"alice", "correct.py", "load_error.py", "seed_buggy.py", "segfault.py"}
    for key, s in by_name(second).items():
        old = by_name(first)[key]
        assert (s["passed"], s["score"], [d["name"] for d in s["diagnoses"]], s["path"]) == (old["passed"], old["score"], [d["name"] for d in old["diagnoses"]], old["path"])
    fresh = json.loads(invoke("--no-cache", *args)[1])
    assert not any(s.get("extra", {}).get("cached") for s in fresh["submissions"])


def test_damaged_cache_entries_are_ignored_and_replaced(folder: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    args = ["--timeout", "1", "--format", "json", "--cache-dir", str(cache), str(folder / "correct.py"), str(folder / "seed_buggy.py")]
    invoke(*args)
    entries = sorted(cache.rglob("*.json"))
    assert len(entries) == 2
    entries[0].write_bytes(b"\x00not json")
    entry = json.loads(entries[1].read_text())
    entry["report"]["passed"] = "yes"  # valid JSON, not a valid report: refused, never trusted
    entries[1].write_text(json.dumps(entry))
    again = json.loads(invoke(*args)[1])
    assert not any(s.get("extra", {}).get("cached") for s in again["submissions"])
    assert [s["passed"] for s in again["submissions"]] == [True, False]
    repaired = json.loads(invoke(*args)[1])
    assert all(s.get("extra", {}).get("cached") for s in repaired["submissions"])


def test_changed_content_is_graded_again(tmp_path: Path) -> None:
    sub = tmp_path / "sub.py"
    shutil.copy(EXAMPLES / "correct.py", sub)
    args = ["--format", "json", "--cache-dir", str(tmp_path / "cache"), str(sub)]
    assert json.loads(invoke(*args)[1])["submissions"][0]["passed"] is True
    shutil.copy(EXAMPLES / "no_scale.py", sub)
    doc = json.loads(invoke(*args)[1])["submissions"][0]
    assert doc["passed"] is False and "cached" not in doc.get("extra", {})


def test_a_file_graded_by_name_is_never_given_another_folder_s_verdict(tmp_path: Path) -> None:
    """The same bytes beside a different helper module are a different submission: a cached
    pass of one candidate's `from impl import attention` is not the other's."""
    for name, impl in (("alice", EXAMPLES / "correct.py"), ("bob", EXAMPLES / "no_scale.py")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "solution.py").write_text("from impl import attention  # noqa: F401\n")
        shutil.copy(impl, tmp_path / name / "impl.py")
    cache = ["--format", "json", "--cache-dir", str(tmp_path / "cache")]
    assert json.loads(invoke(*cache, str(tmp_path / "alice" / "solution.py"))[1])["submissions"][0]["passed"] is True
    bob = json.loads(invoke(*cache, str(tmp_path / "bob" / "solution.py"))[1])["submissions"][0]
    assert bob["passed"] is False and "cached" not in bob.get("extra", {})
    # And one candidate's helper changed after a pass: graded again.
    shutil.copy(EXAMPLES / "seed_buggy.py", tmp_path / "alice" / "impl.py")
    again = json.loads(invoke(*cache, str(tmp_path / "alice" / "solution.py"))[1])["submissions"][0]
    assert again["passed"] is False and "cached" not in again.get("extra", {})


@pytest.mark.parametrize(
    ("target", "message"),
    [("missing/report.xml", "missing/report.xml: the folder {tmp}/missing does not exist"), (".", "{tmp}: is a folder")],
)
def test_unwritable_output_is_refused_before_grading(tmp_path: Path, target: str, message: str) -> None:
    path = tmp_path / target if target != "." else tmp_path
    code, out, err = invoke("-o", f"junit={path}", str(EXAMPLES / "correct.py"))
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("grade: error: ") and message.format(tmp=tmp_path) in err


def test_bad_output_option_is_a_usage_error() -> None:
    code, _, err = invoke("-o", "yaml=x.yaml", str(EXAMPLES / "correct.py"))
    assert code == 2 and "unknown format 'yaml'" in err and err.count("\n") == 1


def test_disk_full_leaves_no_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def disk_full(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", disk_full)
    target = tmp_path / "report.xml"
    code, _, err = invoke("--no-cache", "-o", f"junit={target}", str(EXAMPLES / "correct.py"))
    assert code == 2
    assert err == f"grade: error: {target}: no space left on the device\n"
    assert list(tmp_path.iterdir()) == []


def test_candidate_mode_and_github_actions(tmp_path: Path) -> None:
    checkout = tmp_path / "repo"
    checkout.mkdir()
    shutil.copy(EXAMPLES / "seed_buggy.py", checkout / "solution.py")
    summary = tmp_path / "summary.md"
    summary.write_text("earlier steps\n")
    code, out, _ = invoke("--candidate", "--no-cache", str(checkout), env={"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary)})
    assert code == 1
    lines = out.splitlines()
    assert lines[0].startswith("::stop-commands::")
    token = lines[0].split("::")[2]
    resume = lines.index(f"::{token}::")
    assert any("FAILED" in line for line in lines[1:resume])
    annotations = lines[resume + 1 :]
    assert [a.split("title=")[1].split("::")[0] for a in annotations] == ["Scores divided by d_k instead of sqrt(d_k)", "Batched keys transposed over every axis (.T)"]
    assert all(a.startswith(f"::error file={checkout / 'solution.py'}") for a in annotations)
    text = summary.read_text()
    assert text.startswith("earlier steps\n") and "## Attention grader: 0 of 1 passed" in text


def test_annotations_and_locations_name_the_file_as_it_was_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Relative paths stay as given (GitHub resolves them from the repository's root); a report
    taken from the cache for the same file given by another path points at the path given; and a
    copy elsewhere is graded afresh (it sees another path: its output may differ)."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b" / "deeper").mkdir(parents=True)
    shutil.copy(EXAMPLES / "seed_buggy.py", tmp_path / "a" / "sub.py")
    shutil.copy(EXAMPLES / "seed_buggy.py", tmp_path / "b" / "deeper" / "sub.py")  # same name and bytes: same cache key
    monkeypatch.chdir(tmp_path)
    cache = ["--cache-dir", str(tmp_path / "cache")]
    code, out, _ = invoke(*cache, "--format", "github", "a/sub.py")
    assert code == 1 and len(out.splitlines()) == 2
    assert all(line.startswith("::error file=a/sub.py,line=12,") for line in out.splitlines()), out
    code, out, _ = invoke(*cache, "--format", "json", "-o", f"github={tmp_path / 'notes.txt'}", "b/deeper/sub.py")
    (sub,) = json.loads(out)["submissions"]
    assert code == 1 and sub["extra"].get("cached") is None
    assert [d["location"]["file"] for d in sub["diagnoses"]] == ["b/deeper/sub.py"] * 2
    assert all(line.startswith("::error file=b/deeper/sub.py,line=12,") for line in (tmp_path / "notes.txt").read_text().splitlines())
    monkeypatch.chdir(tmp_path / "a")
    code, out, _ = invoke(*cache, "--format", "json", "sub.py")
    (sub,) = json.loads(out)["submissions"]
    assert code == 1 and sub["extra"].get("cached") is True
    assert [d["location"]["file"] for d in sub["diagnoses"]] == ["sub.py"] * 2


def _grade_process(args: list[str], tmp_path: Path) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("GITHUB_ACTIONS",)}
    env.update(PYTHONPATH=str(ROOT), GRADER_CACHE_DIR=str(tmp_path / "cache"), CI="true")
    return subprocess.Popen([sys.executable, "-m", "grader", *args], cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_ctrl_c_keeps_and_writes_what_was_graded(tmp_path: Path, jobs: str) -> None:
    batch = tmp_path / "subs"
    batch.mkdir()
    shutil.copy(EXAMPLES / "correct.py", batch / "a_correct.py")
    for name in ("b_slow.py", "c_slow.py", "d_slow.py"):
        (batch / name).write_text(HANG)
    report, gradebook, junit = tmp_path / "out.json", tmp_path / "out.csv", tmp_path / "out.xml"
    proc = _grade_process(["--quiet", "--jobs", jobs, "--timeout", "60", "-o", f"json={report}", "-o", f"csv={gradebook}", "-o", f"junit={junit}", str(batch)], tmp_path)
    assert proc.stdout is not None
    first = proc.stdout.readline()  # a_correct.py is done once its line is printed
    assert "PASSED" in first and "a_correct.py" in first
    time.sleep(0.3)  # the slow ones are running now
    started = time.monotonic()
    proc.send_signal(signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=20)
    finally:
        proc.kill()
    assert time.monotonic() - started < 10  # the running workers were killed, not waited for
    assert proc.returncode == 130
    assert err.strip().splitlines() == ["grade: interrupted: 1 of 4 submissions graded; their results are kept"]
    doc = json.loads(report.read_text())
    assert [Path(s["path"]).name for s in doc["submissions"]] == ["a_correct.py"]
    assert doc["submissions"][0]["passed"] is True
    # The gradebook and JUnit list every submission: the ones never reached as not graded.
    rows = list(csv.DictReader(io.StringIO(gradebook.read_text())))
    assert [(Path(r["path"]).name, r["verdict"]) for r in rows] == [("a_correct.py", "passed"), *((n, "not graded") for n in ("b_slow.py", "c_slow.py", "d_slow.py"))]
    assert all("interrupted" in r["error"] for r in rows[1:])
    root = ET.parse(junit).getroot()
    assert (len(root.findall("testsuite")), root.get("skipped"), root.get("errors")) == (4, "3", "0")
    assert len(root.findall("testsuite/testcase/skipped")) == 3


def test_json_stays_a_clean_document_under_github_actions(tmp_path: Path) -> None:
    code, out, err = invoke("--no-cache", "--format", "json", str(EXAMPLES / "seed_buggy.py"), env={"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(tmp_path / "s.md")})
    assert code == 1
    assert json.loads(out)["summary"]["total"] == 1  # stdout: the document and nothing else
    assert [line.split("::")[1].split(" ")[0] for line in err.splitlines()] == ["error", "error"]


def test_no_home_folder_grades_uncached_with_a_warning(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """HOME unset and a user id without a passwd entry (a container run with --user 12345):
    Path.home() raises, and grading goes on without the cache."""
    import pwd

    def no_entry(uid: int) -> pwd.struct_passwd:
        raise KeyError(f"getpwuid(): uid not found: {uid}")

    for name in ("HOME", "XDG_CACHE_HOME", "GRADER_CACHE_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(pwd, "getpwuid", no_entry)
    result = CliRunner().invoke(cli, ["--format", "json", str(folder / "correct.py")])
    assert result.exit_code == 0, result.output
    assert "results are not cached: no home folder" in result.stderr
    assert json.loads(result.stdout)["submissions"][0]["passed"]
