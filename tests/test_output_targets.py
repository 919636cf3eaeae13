"""Where report files go: devices and FIFOs written through, links kept as links, never onto an
input of the run, never two outputs onto one file, and a file in the way of a folder named."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import EXAMPLES
from grader.cli import cli
from grader.fsutil import output_target

CORRECT = EXAMPLES / "correct.py"


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


def passed(document: str) -> bool:
    report = json.loads(document)
    return [s["passed"] for s in report["submissions"]] == [True]


def refused(*args: str) -> str:
    """The run refused before grading: one line, exit 2; its error line."""
    code, out, err = invoke(*args)
    assert code == 2 and out == "", (code, err)
    assert err.count("\n") == 1 and err.startswith("grade: error: ") and "Traceback" not in err, err
    return err


def leftovers(*folders: Path) -> list[str]:
    """Temporary files of a report left in these folders."""
    return [p.name for folder in folders for p in folder.iterdir() if p.name.endswith(".tmp")]


@pytest.fixture()
def sub(tmp_path: Path) -> Path:
    # In a folder of its own: the folder of a file graded by name is the candidate's, and the
    # outputs of these tests go through links of the user's, beside it.
    (tmp_path / "candidate").mkdir()
    path = tmp_path / "candidate" / "sub.py"
    shutil.copy(CORRECT, path)
    return path


# 1. Targets that are not regular files: written through, never replaced.


def test_a_fifo_is_written_through_and_stays_a_fifo(tmp_path: Path, sub: Path) -> None:
    fifo = tmp_path / "report.fifo"
    os.mkfifo(fifo)
    got: list[bytes] = []

    def read() -> None:
        with open(fifo, "rb") as handle:  # blocks until the run opens it for writing
            got.append(handle.read())

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    code, _, err = invoke("-q", "--no-cache", "-o", f"json={fifo}", str(sub))
    reader.join(timeout=60)
    if reader.is_alive():  # the run never opened it: let the reader go before failing
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        reader.join(timeout=10)
        pytest.fail(f"the FIFO was never written (exit {code}): {err}")
    assert code == 0, err
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert passed(got[0].decode())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["candidate", "report.fifo"]


def test_a_fifo_that_no_process_reads_is_refused_before_grading(tmp_path: Path, sub: Path) -> None:
    """Opened for writing, such a FIFO would block the run for good once it had graded."""
    fifo = tmp_path / "nobody-reads.fifo"
    os.mkfifo(fifo)
    done = subprocess.run([sys.executable, "-m", "grader", "--no-cache", "-o", f"json={fifo}", str(sub)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stdout == ""  # nothing graded
    assert done.stderr == f"grade: error: {fifo}: a FIFO that no process reads; start its reader first\n"
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_dev_null_stays_a_character_device(sub: Path) -> None:
    code, _, err = invoke("-q", "--no-cache", "-o", "json=/dev/null", "-o", "junit=/dev/null", str(sub))
    assert code == 0, err  # two outputs through one device: each written in turn, none lost
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_a_link_to_stdout_writes_to_the_run_s_stdout(tmp_path: Path, sub: Path) -> None:
    """A link to /dev/stdout (itself a link to /proc/self/fd/1), with stdout a regular file: the
    report is appended after the text report through stdout's own descriptor, and both links
    stay links."""
    link = tmp_path / "to-stdout"
    link.symlink_to("/dev/stdout")
    out = tmp_path / "out.txt"
    with open(out, "w") as stdout:
        done = subprocess.run([sys.executable, "-m", "grader", "--no-cache", "-q", "-o", f"json={link}", str(sub)], stdout=stdout, stderr=subprocess.PIPE, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert link.is_symlink() and os.path.islink("/dev/stdout")
    first, document = out.read_text().split("\n", 1)
    assert first.startswith("PASSED") and passed(document)


def test_a_descriptor_path_is_written_through(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    assert output_target(fifo).through and not output_target(tmp_path / "x.json").through
    stdout = output_target(Path("/dev/stdout"))
    assert stdout.through and stdout.descriptor and stdout.file.parent.name == "fd"


def test_a_link_keeps_being_a_link_and_its_target_gets_the_report(tmp_path: Path, sub: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    target = elsewhere / "report.json"
    target.write_text("the previous report")
    (tmp_path / "reports").mkdir()  # the user's folder, not the submission's
    link = tmp_path / "reports" / "report.json"
    link.symlink_to(target)
    dangling = tmp_path / "reports" / "new.json"
    dangling.symlink_to(elsewhere / "new-target.json")  # not there yet: made where the link leads
    code, _, err = invoke("-q", "--no-cache", "-o", f"json={link}", "-o", f"junit={dangling}", str(sub))
    assert code == 0, err
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert passed(target.read_text())
    assert dangling.is_symlink() and (elsewhere / "new-target.json").read_text().startswith("<?xml")
    assert leftovers(tmp_path / "reports", elsewhere) == []


def test_a_failed_run_leaves_a_link_and_its_target_as_they_were(tmp_path: Path, sub: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def disk_full(fd: int) -> None:
        raise OSError(28, "No space left on device")

    (tmp_path / "out").mkdir()
    target = tmp_path / "out" / "target.json"
    target.write_text("the previous report")
    link = tmp_path / "out" / "link.json"
    link.symlink_to(target.name)
    monkeypatch.setattr(os, "fsync", disk_full)
    code, _, err = invoke("-q", "--no-cache", "-o", f"json={link}", str(sub))
    assert code == 2 and err == f"grade: error: {link}: no space left on the device\n"
    assert link.is_symlink() and target.read_text() == "the previous report"
    assert leftovers(tmp_path / "out") == []


def test_a_feedback_file_that_is_a_link_stays_a_link(tmp_path: Path, sub: Path) -> None:
    folder = tmp_path / "feedback"
    folder.mkdir()
    kept = tmp_path / "kept.md"
    (folder / "sub.md").symlink_to(kept)
    code, _, err = invoke("-q", "--no-cache", "--feedback", str(folder), str(sub))
    assert code == 0, err
    assert (folder / "sub.md").is_symlink() and kept.read_text().startswith("# Feedback for sub")


def _checkout(root: Path) -> Path:
    (root / ".git").mkdir(parents=True)
    (root / ".git" / "config").write_text("[core]\n\tbare = false\n")
    shutil.copy(CORRECT, root / "attention.py")
    return root


@pytest.mark.parametrize("where", ["outside", "git-config", "folder-out", "by-name"])
def test_no_output_goes_through_a_link_in_a_candidates_folder(tmp_path: Path, where: str) -> None:
    """The candidate commits the links of their checkout, and in CI the job's folder is that
    checkout: `grader-junit.xml -> .git/config` (or to any file the job may write) would have
    the report replace it. Refused before grading; the link's target is untouched."""
    checkout = _checkout(tmp_path / "checkout")
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "important.txt").write_text("precious")
    graded = ["--candidate", str(checkout)]
    if where == "outside":
        output = checkout / "grader-junit.xml"
        output.symlink_to(victim / "important.txt")
    elif where == "git-config":
        output = checkout / "grader-junit.xml"
        output.symlink_to(".git/config")
    elif where == "folder-out":
        (checkout / "reports").symlink_to(victim)
        output = checkout / "reports" / "important.txt"
    else:  # a file graded by name: its folder is the candidate's too
        output = checkout / "grader-junit.xml"
        output.symlink_to(victim / "important.txt")
        graded = [str(checkout / "attention.py")]
    err = refused("--no-cache", "-o", f"junit={output}", *graded)
    assert "symbolic link inside" in err and "a candidate's folder" in err
    assert (victim / "important.txt").read_text() == "precious"
    assert (checkout / ".git" / "config").read_text() == "[core]\n\tbare = false\n"


def test_an_output_in_a_candidates_folder_without_links_is_written(tmp_path: Path) -> None:
    checkout = _checkout(tmp_path / "checkout")
    code, _, err = invoke("-q", "--no-cache", "-o", f"json={checkout / 'grader-report.json'}", "--candidate", str(checkout))
    assert code == 0, err
    assert passed((checkout / "grader-report.json").read_text())


# 2. An output that is an input of the run: refused before grading, the input untouched.


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A starter suite and its references, as `grade suite new` and `--regenerate` write them."""
    path = tmp_path_factory.mktemp("suite") / "task.yaml"
    assert invoke("suite", "new", str(path))[0] == 0
    code, _, err = invoke("references", "--regenerate", "--suite", str(path))
    assert code == 0, err
    return path


def references_of(suite: Path) -> Path:
    folders = [p for p in suite.parent.iterdir() if p.is_dir()]
    assert len(folders) == 1
    return folders[0]


def test_an_output_onto_the_submission_is_refused(tmp_path: Path, sub: Path) -> None:
    before = sub.read_bytes()
    err = refused("-q", "-o", f"json={sub}", str(sub))
    assert f"-o json={sub} would overwrite the submission {sub}" in err
    (tmp_path / "hard.py").hardlink_to(sub)  # another name of the same file
    assert f"-o json={tmp_path / 'hard.py'} would overwrite the submission {sub}" in refused("-q", "-o", f"json={tmp_path / 'hard.py'}", str(sub))
    (tmp_path / "soft.json").symlink_to(sub)
    assert "would overwrite the submission" in refused("-q", "-o", f"junit={tmp_path / 'soft.json'}", str(sub))
    assert sub.read_bytes() == before and leftovers(tmp_path) == []
    # Beside it, the report is written.
    code, _, err = invoke("-q", "--no-cache", "-o", f"json={tmp_path / 'sub.json'}", str(sub))
    assert code == 0 and passed((tmp_path / "sub.json").read_text()), err


def test_an_output_onto_a_file_of_a_graded_folder_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "subs"
    (folder / "alice").mkdir(parents=True)
    shutil.copy(CORRECT, folder / "correct.py")
    shutil.copy(CORRECT, folder / "alice" / "attention.py")
    (folder / "alice" / "helper.py").write_text("SCALE = 1\n")
    for target, what in [
        (folder / "correct.py", f"the submission {folder / 'correct.py'}"),
        (folder / "alice" / "attention.py", f"the submission {folder / 'alice' / 'attention.py'}"),
        (folder / "alice" / "helper.py", f"{folder / 'alice' / 'helper.py'}, a file of the checkout {folder / 'alice'}"),
    ]:
        before = target.read_bytes()
        err = refused("-q", "-o", f"html={target}", str(folder))
        assert f"-o html={target} would overwrite {what}" in err, err
        assert target.read_bytes() == before
    # A report in the graded folder that is not one of its files is written (and not graded).
    code, _, err = invoke("-q", "--no-cache", "-o", f"json={folder / 'report.json'}", str(folder))
    assert code == 0, err
    assert [s["passed"] for s in json.loads((folder / "report.json").read_text())["submissions"]] == [True, True]


def test_an_output_onto_the_suite_or_into_its_references_is_refused(tmp_path: Path, sub: Path, suite: Path) -> None:
    before = suite.read_bytes()
    assert f"-o json={suite} would overwrite the suite {suite}" in refused("-q", "--suite", str(suite), "-o", f"json={suite}", str(sub))
    assert suite.read_bytes() == before
    references = references_of(suite)
    listed = sorted(p.name for p in references.iterdir())
    inside = references / "report.json"
    err = refused("-q", "--suite", str(suite), "-o", f"json={inside}", str(sub))
    assert f"-o json={inside} is inside the suite's references folder {references}" in err, err
    assert sorted(p.name for p in references.iterdir()) == listed
    code, _, err = invoke("-q", "--no-cache", "--suite", str(suite), "-o", f"json={tmp_path / 'report.json'}", str(sub))
    assert code == 0 and passed((tmp_path / "report.json").read_text()), err


def test_an_output_onto_the_roster_is_refused(tmp_path: Path, sub: Path) -> None:
    roster = tmp_path / "roster.csv"
    roster.write_text("candidate,email\nsub,sub@example.org\n")
    err = refused("-q", "--roster", str(roster), "-o", f"csv={roster}", str(sub))
    assert f"-o csv={roster} would overwrite the roster {roster}" in err
    assert roster.read_text() == "candidate,email\nsub,sub@example.org\n"
    code, _, err = invoke("-q", "--no-cache", "--roster", str(roster), "-o", f"csv={tmp_path / 'grades.csv'}", str(sub))
    assert code == 0 and "sub@example.org" in (tmp_path / "grades.csv").read_text(), err


def test_merge_refuses_an_output_onto_one_of_its_reports(tmp_path: Path, sub: Path) -> None:
    folder = tmp_path / "m"
    folder.mkdir()
    code, _, err = invoke("-q", "--no-cache", "-o", f"json={folder / 's1.json'}", str(sub))
    assert code == 0, err
    shutil.copy(folder / "s1.json", folder / "s2.json")
    before = (folder / "s1.json").read_bytes()
    err = refused("merge", "-q", "-o", f"json={folder / 's1.json'}", str(folder / "s1.json"), str(folder / "s2.json"))
    assert f"-o json={folder / 's1.json'} would overwrite the report {folder / 's1.json'}" in err
    assert (folder / "s1.json").read_bytes() == before
    code, _, err = invoke("merge", "-q", "-o", f"json={folder / 'merged.json'}", str(folder / "s1.json"))
    assert code == 0 and passed((folder / "merged.json").read_text()), err


# 3. Two outputs naming one file.


def test_two_outputs_onto_one_file_are_refused(tmp_path: Path, sub: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert "-o json=x.json and -o json=x.json are the same file" in refused("-q", "-o", "json=x.json", "-o", "json=x.json", str(sub))
    assert "-o json=x.json and -o junit=x.json are the same file" in refused("-q", "-o", "json=x.json", "-o", "junit=./x.json", str(sub))
    Path("x.json").write_text("mine")
    Path("xlink.json").symlink_to("x.json")
    assert "-o json=x.json and -o csv=xlink.json are the same file" in refused("-q", "-o", "json=x.json", "-o", "csv=xlink.json", str(sub))
    Path("hard.json").hardlink_to("x.json")
    assert "-o json=x.json and -o csv=hard.json are the same file" in refused("-q", "-o", "json=x.json", "-o", "csv=hard.json", str(sub))
    assert "-o json=fb and --feedback fb are the same file" in refused("-q", "-o", "json=fb", "--feedback", "fb", str(sub))
    assert Path("x.json").read_text() == "mine" and not Path("fb").exists() and leftovers(tmp_path) == []
    code, _, err = invoke("-q", "--no-cache", "-o", "json=y.json", "-o", "junit=y.xml", str(sub))
    assert code == 0 and passed(Path("y.json").read_text()) and Path("y.xml").read_text().startswith("<?xml"), err


# 4. A file where a folder should be.


def test_a_file_in_the_way_of_the_output_s_folder_is_named(tmp_path: Path, sub: Path) -> None:
    afile = tmp_path / "afile"
    afile.write_text("a file")
    assert refused("-q", "-o", f"json={afile / 'x.json'}", str(sub)) == f"grade: error: {afile / 'x.json'}: {afile} is not a folder\n"
    assert refused("-q", "-o", f"json={afile / 'deeper' / 'x.json'}", str(sub)) == f"grade: error: {afile / 'deeper' / 'x.json'}: {afile} is not a folder\n"
    missing = tmp_path / "missing" / "x.json"
    assert refused("-q", "-o", f"json={missing}", str(sub)) == f"grade: error: {missing}: the folder {missing.parent} does not exist\n"
    (tmp_path / "folder").mkdir()
    code, _, err = invoke("-q", "--no-cache", "-o", f"json={tmp_path / 'folder' / 'x.json'}", str(sub))
    assert code == 0 and passed((tmp_path / "folder" / "x.json").read_text()), err
