"""grader: grades submissions of scaled dot-product attention and names the likely bug.

    from grader import grade
    for report in grade("submission.py"):
        print(report.passed, [d.name for d in report.diagnoses])

Kept import-light on purpose: the sandboxed worker imports this package too, and every module
pulled in here would slow each worker start. So ``grade`` and ``Options`` are looked up in
grader.api only when first asked for (PEP 562).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = ["Options", "grade", "__version__"]

if TYPE_CHECKING:
    from grader.api import Options as Options, grade as grade


def __getattr__(name: str) -> Any:
    if name in ("grade", "Options"):
        return getattr(importlib.import_module("grader.api"), name)
    raise AttributeError(f"module 'grader' has no attribute {name!r}")
