"""The worker boundary, issue-2 level: bounded, plain data out, nothing of the caller leaks.

Each hostile submission in tests/hostile/ is bounded by itself (loops and children stop on their
own), so a failure of the grader's limits could not harm the machine.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import replace
from pathlib import Path

import pytest

from conftest import error_names
from grader.api import Prepared, grade_file

HOSTILE = Path(__file__).resolve().parent / "hostile"


def quick(prepared: Prepared, timeout: float = 2.0) -> Prepared:
    return replace(prepared, limits=replace(prepared.limits, timeout_s=timeout))


def test_environment_is_scrubbed(prepared: Prepared, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRADER_TEST_SECRET", "s3cr3t-token")
    report = grade_file(HOSTILE / "print_env.py", prepared)
    assert report.passed
    assert "s3cr3t-token" not in report.output.text
    assert "GRADER_TEST_SECRET" not in report.output.text


def test_stdin_is_empty(prepared: Prepared) -> None:
    report = grade_file(HOSTILE / "read_stdin.py", quick(prepared))
    assert "stdin gave 0 characters" in report.output.text
    assert error_names(report) == ["crash"]


def test_output_is_capped_and_counted(prepared: Prepared) -> None:
    report = grade_file(HOSTILE / "flood_output.py", prepared)
    assert report.passed  # printing is not a bug
    assert report.output.kept_bytes == prepared.limits.output_bytes
    assert report.output.total_bytes == 2000 * 4097
    assert report.output.text.startswith("xxxx")


@pytest.mark.parametrize("name", ["exit_in_call.py", "segfault.py"])
def test_interpreter_death_is_a_crash(prepared: Prepared, name: str) -> None:
    report = grade_file(HOSTILE / name, quick(prepared))
    assert error_names(report) == ["crash"]
    assert not report.passed
    assert report.worker_status == "crashed"


def test_forged_result_bytes_cannot_pass(prepared: Prepared) -> None:
    report = grade_file(HOSTILE / "forge_results.py", quick(prepared))
    assert not report.passed
    assert report.score < report.max_score


def test_timeout_kills_the_worker_and_its_children(prepared: Prepared) -> None:
    started = time.monotonic()
    report = grade_file(HOSTILE / "child_sleeper.py", quick(prepared, 1.5))
    assert time.monotonic() - started < 6
    assert error_names(report) == ["timeout"]
    match = re.search(r"child pid (\d+)", report.output.text)
    assert match, report.output.text
    pid = int(match.group(1))
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline and _alive(pid):
        time.sleep(0.05)
    assert not _alive(pid)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_forged_ready_message_buys_no_time(prepared: Prepared) -> None:
    """issue 6: "ready" is accepted only once, before loading, and only for a framework worker."""
    started = time.monotonic()
    report = grade_file(HOSTILE / "forge_ready.py", quick(prepared, 1.5))
    assert time.monotonic() - started < 6
    assert not report.passed
    assert report.worker_status in ("protocol-error", "timeout")
