"""Shared fixtures: the default suite prepared once per test session."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

from grader.api import Prepared, grade_file, prepare
from grader.report.model import Report

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "submissions_example"
CORPUS = Path(__file__).resolve().parent / "corpus"
# Candidate repositories in the corpus carry their own tests/test_*.py: submissions, not our tests.
collect_ignore_glob = ["corpus/*"]


@pytest.fixture(scope="session")
def prepared() -> Prepared:
    return prepare()


@pytest.fixture(scope="session")
def grade_path(prepared: Prepared):  # type: ignore[no-untyped-def]
    cache: dict[Path, Report] = {}

    def run(path: Path) -> Report:
        if path not in cache:
            cache[path] = grade_file(path, prepared)
        return cache[path]

    return run


# CI installs torch and JAX before the framework tests and sets this: a missing one fails there.
REQUIRE_FRAMEWORKS = os.environ.get("GRADER_REQUIRE_FRAMEWORKS") == "1"


def needs_framework(framework: str | None) -> None:
    """Skip the test where ``framework`` (torch, jax) is not installed; fail it in CI."""
    if framework and importlib.util.find_spec(framework) is None:
        if REQUIRE_FRAMEWORKS:
            pytest.fail(f"{framework} is not installed but GRADER_REQUIRE_FRAMEWORKS=1")
        pytest.skip(f"{framework} is not installed")


def assert_verdict(report: Report, want: dict) -> None:  # type: ignore[type-arg]
    """A corpus table's row (passed, diagnoses, warnings when given) against a report."""
    messages = [d.message for d in report.diagnoses]
    assert report.passed is want["passed"], messages
    assert error_names(report) == sorted(want["diagnoses"]), messages
    if "warnings" in want:
        assert warning_names(report) == sorted(want["warnings"]), messages


def error_names(report: Report) -> list[str]:
    return sorted(d.name for d in report.diagnoses if d.severity == "error")


def warning_names(report: Report) -> list[str]:
    return sorted(d.name for d in report.diagnoses if d.severity == "warning")


@pytest.fixture(autouse=True, scope="session")
def _private_result_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Tests never read or fill the user's result cache (grade reads GRADER_CACHE_DIR)."""
    import os

    os.environ["GRADER_CACHE_DIR"] = str(tmp_path_factory.mktemp("grader-cache"))
