"""Submissions as candidates write them, each graded with the right verdict and diagnoses:
notebooks, repository checkouts, tuple returns, required masks, PyTorch and JAX; masked tasks; a
2-D-only take-home. The tables are tests/corpus/{forms,masks,take_home_2d}/expected.yaml.

Entries that need torch or jax are marked `framework` and skip when it is not installed, unless
GRADER_REQUIRE_FRAMEWORKS=1 (as in CI, which installs the CPU builds), where a missing framework
fails instead of skipping.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest
import yaml

from conftest import CORPUS, error_names
from grader.api import Prepared, grade_file, prepare
from grader.pipeline import grade_one
from grader.discover import Rule, find_in_checkout
from grader.report.model import Report
from grader.suite import load_suite

# Folder of the table -> the suite its entries are graded with (None: the default suite).
TABLES = {"forms": None, "masks": "suites/masks.yaml", "take_home_2d": "suites/take_home_2d.yaml"}
REQUIRE_FRAMEWORKS = os.environ.get("GRADER_REQUIRE_FRAMEWORKS") == "1"


def _entries() -> list:  # type: ignore[type-arg]
    params = []
    for folder, suite in TABLES.items():
        table = yaml.safe_load((CORPUS / folder / "expected.yaml").read_text())
        for key, want in table.items():
            want = {"suite": suite, **want}
            marks = [pytest.mark.framework] if want.get("requires") else []
            params.append(pytest.param(folder, want.get("path", key), want, id=f"{folder}/{key}", marks=marks))
    return params


@pytest.fixture(scope="session")
def prepared_for() -> dict[str | None, Prepared]:
    cache: dict[str | None, Prepared] = {}

    def get(suite: str | None) -> Prepared:
        if suite not in cache:
            cache[suite] = prepare(load_suite(CORPUS / suite) if suite else None)
        return cache[suite]

    return get  # type: ignore[return-value]


def _needs(framework: str | None) -> None:
    if framework and importlib.util.find_spec(framework) is None:
        if REQUIRE_FRAMEWORKS:
            pytest.fail(f"{framework} is not installed but GRADER_REQUIRE_FRAMEWORKS=1")
        pytest.skip(f"{framework} is not installed (pip install 'attention-grader[{framework}]')")


@pytest.mark.parametrize(("folder", "path", "want"), _entries())
def test_form_is_graded_as_expected(folder: str, path: str, want: dict, prepared_for) -> None:  # type: ignore[no-untyped-def, type-arg]
    _needs(want.get("requires"))
    prepared = prepared_for(want["suite"])
    target = CORPUS / folder / path
    if want.get("candidate"):  # as `grade --candidate DIR` finds the file in a checkout
        rule = Rule(function=prepared.function, entry=prepared.suite.entry)
        report: Report = grade_one(find_in_checkout(target, rule), prepared, None)[0]
    else:
        report = grade_file(target, prepared)
    messages = [d.message for d in report.diagnoses]
    if "error" in want:  # nothing could be graded: the report says why
        assert want["error"] in (report.error or ""), report.error
    assert report.passed is want["passed"], messages
    assert error_names(report) == sorted(want["diagnoses"]), messages
    if "message" in want:
        assert any(want["message"] in m for m in messages), messages
    if "where" in want:
        assert any(want["where"] in m for m in messages), messages
    if "returns" in want:
        assert report.extra["returns"] == want["returns"]
    if want.get("requires"):
        assert report.extra["framework"] == want["requires"]
    if want["passed"]:
        assert report.score == report.max_score


def test_a_2d_submission_fails_the_default_suite_but_passes_the_2d_take_home(prepared_for) -> None:  # type: ignore[no-untyped-def]
    """The same file: `K.T` and axis=1 are right for one sequence, wrong for a batch."""
    path = CORPUS / "take_home_2d" / "correct_2d.py"
    assert grade_file(path, prepared_for("suites/take_home_2d.yaml")).passed
    default = grade_file(path, prepared_for(None))
    assert not default.passed
    # fresh: its random cases include a batch and a multi-head batch
    assert {c.id for c in default.checks if not c.passed} == {"batch", "batch-square", "multihead", "length-one", "fresh"}


def test_the_2d_suite_runs_no_batched_probe(prepared_for) -> None:  # type: ignore[no-untyped-def]
    prepared = prepared_for("suites/take_home_2d.yaml")
    assert prepared.suite.disabled == ("batch",)
    assert all(p.Q.ndim == 2 for p in prepared.probes)
    assert prepared.suite.max_score == 10


def test_notebook_load_error_names_the_cell_in_json_evidence(prepared_for) -> None:  # type: ignore[no-untyped-def]
    report = grade_file(CORPUS / "forms" / "notebook_broken_cell.ipynb", prepared_for(None))
    (diagnosis,) = report.diagnoses
    assert diagnosis.evidence["cell"] == 5 and diagnosis.evidence["line"] == 3
    assert report.checks[0].summary.endswith("at cell 5, line 3")
    # The terminal's "where" line (a location) points there too, with the code of that line.
    assert diagnosis.location is not None
    assert (diagnosis.location.cell, diagnosis.location.line, diagnosis.location.code) == (5, 3, 'data = np.load("assignment_data.npz")')
    # The fix speaks of cells: "import submission" means nothing to a notebook's author.
    assert diagnosis.fix.startswith("Make the notebook run from top to bottom as a script: cell 5 raises FileNotFoundError")


def test_a_framework_that_is_not_installed_is_a_clear_load_error(prepared_for, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    import grader.submission

    monkeypatch.setattr(grader.submission, "installed", lambda framework: framework == "numpy")
    report = grade_file(CORPUS / "forms" / "torch_correct.py", prepared_for(None))
    assert not report.passed and report.worker_status == "not-run"
    (diagnosis,) = report.diagnoses
    assert diagnosis.name == "load-error"
    assert "this submission imports torch, which is not installed; install it with pip install 'attention-grader[torch]'" in diagnosis.message


def test_imports_of_both_frameworks_need_the_suite_to_choose(prepared_for, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    both = tmp_path / "both.py"
    both.write_text("import torch\nimport jax\n\ndef attention(Q, K, V):\n    return Q\n")
    report = grade_file(both, prepared_for(None))
    assert error_names(report) == ["load-error"]
    assert "imports both torch and jax" in report.diagnoses[0].message
