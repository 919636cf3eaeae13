"""grader: grades submissions of scaled dot-product attention and names the likely bug.

Kept import-light on purpose: the sandboxed worker imports this package too, and every module
pulled in here would slow each worker start.
"""

from __future__ import annotations

__version__ = "0.1.0"
