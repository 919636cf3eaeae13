"""A reader of stdout that goes away (`grade ... | head -1`) costs nothing: the run goes on, the
report files are written whole, and the exit code is the grading's, with nothing on stderr."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

from conftest import EXAMPLES, ROOT


def _grade_into_a_pipe_read_once(args: list[str]) -> tuple[int, str]:
    """Run grade with stdout a pipe whose reader takes one line and leaves, as `| head -1` does."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "grader", *args], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.readline()
    proc.stdout.close()  # the reader is gone: every later write of grade's meets a broken pipe
    err = proc.stderr.read().decode(errors="replace")
    return proc.wait(timeout=120), err


def test_a_reader_that_leaves_loses_no_report_file(tmp_path: Path) -> None:
    folder = tmp_path / "subs"
    folder.mkdir()
    for name in ("correct.py", "seed_buggy.py", "no_scale.py"):
        shutil.copy(EXAMPLES / name, folder / name)
    junit = tmp_path / "report.xml"
    code, err = _grade_into_a_pipe_read_once(["--no-cache", "-o", f"junit={junit}", str(folder)])
    assert code == 1, err  # two of the three fail: the grading's exit code, not a pipe's
    assert err == ""
    suites = ET.parse(junit).getroot().findall("testsuite")
    assert len(suites) == 3


def test_a_passing_submission_still_exits_0(tmp_path: Path) -> None:
    code, err = _grade_into_a_pipe_read_once(["--no-cache", str(EXAMPLES / "correct.py")])
    assert (code, err) == (0, "")
