"""Whether a fix reads as code to paste or as a sentence, for the reports that set code apart.

A fix is a line of code (``scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(d_k)``, ``return weights
@ V``) or a sentence that may hold some (``Swap only the last two axes: np.swapaxes(K, -1, -2)``,
``Remove endless loops ...``). The HTML page and the Markdown report show the first as code and
the second as text, its backticked parts as code.
"""

from __future__ import annotations

import re

# An assignment (a, b = ...; x[i] = ...; x += ...), a return, a def, or a call at the start.
_CODE = re.compile(r"\s*(?:return\b|def\b|[A-Za-z_][\w.]*(?:\[[^\]]*\])?(?:\s*,\s*[A-Za-z_][\w.]*)*\s*[-+*/@]?=(?!=)|[a-z_][\w.]*\()")


def is_code(fix: str) -> bool:
    return _CODE.match(fix) is not None
