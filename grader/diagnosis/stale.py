"""A result kept from an earlier call: the words of ``hardcoded`` or ``values-mismatch`` when
that is what failed.

The last fresh case has the shapes of an earlier fresh case and new values (grader.probes), and
the stored cases call each shape with two V (the identity and random values). A function that
keeps a result between calls (``functools.lru_cache`` on the shapes, a dict keyed by them, a
module-level variable) answers a later call with the earlier call's output, or with the earlier
call's weights times this call's V: both are checked here, so the report can say which.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from grader.diagnosis.catalogue import REFERENCE
from grader.diagnosis.model import Diagnosis
from grader.diagnosis.replay import Evidence

FIX = (
    "Compute the result from this call's Q, K and V: a cache keyed on the shapes "
    "(functools.lru_cache of a function of Q.shape, a dict by shape) or a variable kept between "
    "calls returns what an earlier call computed."
)


def stale_source(ev: Evidence, name: str) -> tuple[str, str] | None:
    """The earlier probe of the same shapes whose result ``name`` got, and what was kept
    ("output" or "weights"), or None."""
    probe, actual = ev.probes[name], ev.returned(name)
    if actual is None:
        return None
    shapes = (probe.Q.shape, probe.K.shape, probe.V.shape)
    for other, earlier in ev.probes.items():
        if other == name:
            break  # only calls made before this one
        if (earlier.Q.shape, earlier.K.shape, earlier.V.shape) != shapes or earlier.mask is not None or probe.mask is not None:
            continue
        if all(np.array_equal(a, b) for a, b in ((earlier.Q, probe.Q), (earlier.K, probe.K), (earlier.V, probe.V))):
            continue  # the same call again: the determinism check's
        if not ev.matches(REFERENCE, other):
            continue  # a kept result was right when it was computed; a constant answer is not one
        before = ev.returned(other)
        if before is not None and before.shape == actual.shape and np.allclose(actual, before, rtol=1e-9, atol=1e-12):
            return other, "output"
        kept = REFERENCE.weights(earlier.Q, earlier.K, earlier.V) @ probe.V
        if kept.shape == actual.shape and np.allclose(actual, kept, rtol=1e-6, atol=1e-9):
            return other, "weights"
    return None


def stale_words(ev: Evidence, name: str) -> str | None:
    """The sentence for the report, or None when ``name`` got no earlier call's result."""
    found = stale_source(ev, name)
    if found is None:
        return None
    other, kept = found
    what = f"the output of {other}" if kept == "output" else f"the weights of {other} (computed from its Q and K)"
    return f"{name} has the shapes of {other} and new values, and gets {what}: the function returns what an earlier call with the same shapes computed"


def stale_mismatch(ev: Evidence, names: list[str], failed: tuple[str, ...]) -> Diagnosis | None:
    """``values-mismatch`` with the words of a kept result, when the first probe of ``names``
    that differs from the reference got an earlier call's result; else None."""
    for name in names:
        if ev.returned(name) is None or ev.matches(REFERENCE, name):
            continue
        words = stale_words(ev, name)
        if words is None:
            return None
        return replace(Diagnosis.of("values-mismatch", words, {"probe": name, "stale": True}, failed), fix=FIX)
    return None
