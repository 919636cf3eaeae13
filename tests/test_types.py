"""The package type-checks under the project's mypy settings (disallow_untyped_defs)."""

from __future__ import annotations

import subprocess
import sys

from conftest import ROOT


def test_mypy_is_clean() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "grader"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stdout[-3000:]
