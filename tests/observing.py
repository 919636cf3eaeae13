"""Hand-made observations: what a worker would have recorded for an implementation run in-process.

Used by the engine tests and the property tests, so the judgement is tested as a pure function
with no subprocess: each test says exactly what the submission did.
"""

from __future__ import annotations

from typing import Callable, Iterable

import numpy as np

from grader.diagnosis.catalogue import AXES, Variant
from grader.diagnosis.describe import folded_options
from grader.observation import CapturedOutput, ErrorInfo, LoadInfo, Observation, Value, WorkerRun
from grader.probes import Probe

Impl = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]


def observe_probe(probe: Probe, impl: Impl, call: int = 0) -> Observation:
    Q, K, V = probe.Q.copy(), probe.K.copy(), probe.V.copy()
    after = {}
    try:
        with np.errstate(all="ignore"):
            out = impl(Q, K, V)
        obs = Observation(probe.name, call, "returned", 0.0, value=Value("numpy.ndarray", array=np.asarray(out)))
    except Exception as exc:
        obs = Observation(probe.name, call, "raised", 0.0, error=ErrorInfo(type(exc).__name__, str(exc), line=3))
    if probe.return_inputs:
        after = {"Q": Q, "K": K, "V": V}
        obs = Observation(obs.probe, obs.call, obs.status, obs.duration_s, obs.value, obs.error, after)
    return obs


def observe(probes: Iterable[Probe], impl: Impl, status: str = "completed") -> WorkerRun:
    observations = {}
    for probe in probes:
        if probe.gradients:
            continue  # a NumPy worker has no autograd: it skips the gradient probes
        for call in range(probe.repeat):
            observations[(probe.name, call)] = observe_probe(probe, impl, call)
    load = LoadInfo(ok=True, callable_type="function", signature="(Q, K, V)")
    return WorkerRun(status, load, observations, CapturedOutput("", 0, 0), 0.1)  # type: ignore[arg-type]


def same_everywhere(a: Impl, b: Impl, probes: Iterable[Probe]) -> bool:
    """Whether two implementations do the same on every probe (the same exception counts)."""
    for probe in probes:
        x, y = observe_probe(probe, a), observe_probe(probe, b)
        if x.status != y.status:
            return False
        if x.status == "returned":
            assert x.value is not None and y.value is not None
            u, v = x.value.array, y.value.array
            assert u is not None and v is not None
            if u.shape != v.shape or not np.allclose(u, v, rtol=1e-9, atol=1e-12, equal_nan=True):
                return False
    return True


def visible_mistakes(variant: Variant, probes: list[Probe]) -> list[str]:
    """The mistakes of ``variant`` that change what it does on ``probes``. Combined with another
    mistake, one can vanish: with K.T every batch but the B = T = d one raises, and there
    Q.shape[1] is d_k, so a scale taken from Q.shape[1] shows no more than a scale of d_k does.
    Each mistake is replaced by the options of its axis that make fewer mistakes (the correct one
    first); the first that changes nothing on any probe says what is visible of it."""
    names: list[str] = []
    for i, option in enumerate(variant.choice):
        if option is AXES[i].default:
            continue
        visible = list(option.names)
        for alternative in sorted(AXES[i].options, key=lambda o: len(o.names)):
            if set(alternative.names) < set(option.names):
                swapped = Variant(tuple(alternative if j == i else o for j, o in enumerate(variant.choice)))
                if same_everywhere(variant, swapped, probes):
                    visible = list(alternative.names)
                    break
        names += [n for n in visible if n not in names]
    return names


def named_mistakes(variant: Variant, probes: list[Probe]) -> list[str]:
    """The visible mistakes, less those of code written for one rank that are right wherever its
    product is (K.T with a softmax over axis 1): they are reported as the product's one mistake."""
    visible = visible_mistakes(variant, probes)
    folded = folded_options(variant)
    kept = {n for o in variant.deviations if o not in folded for n in o.names}
    return [n for n in visible if n in kept or not any(n in o.names for o in folded)]
