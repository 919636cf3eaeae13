"""Which missing shift a softmax-unstable submission shows: none at all, or one maximum over the
whole array (``s - s.max()``).

The search tries "no shift" first, and on the large probes both often reproduce the submission:
every row whose largest score is past exp's range is nan either way. Where some values stay
finite, those rows tell: a global shift keeps the rows near the array's maximum finite and loses
the ones far below it (0/0), which no shift reproduces only by coincidence. Where everything is
nan, or the code raised, nothing tells them apart and "no shift", the common mistake, stays.
"""

from __future__ import annotations

import numpy as np

from grader.diagnosis.catalogue import POSITION, SHIFT, Option, Variant
from grader.diagnosis.replay import Evidence

NO_SHIFT, GLOBAL = SHIFT.options[1], SHIFT.options[2]


def shift_as_seen(ev: Evidence, option: Option, variant: Variant, names: list[str]) -> Option:
    """``option``, or the global-maximum shift where the evidence shows that one instead."""
    if option is not NO_SHIFT:
        return option
    partly = [n for n in names if ev.probes[n].magnitude > 1.0 and (a := ev.returned(n)) is not None and np.isfinite(a).any() and not np.isfinite(a).all()]
    if not partly:
        return option
    at = POSITION["shift"]
    other = Variant(variant.choice[:at] + (GLOBAL,) + variant.choice[at + 1 :])
    return GLOBAL if all(ev.matches(other, n) for n in names) else option
