"""axis-dropped: a result with some of the output's axes of length 1 removed (a ``.squeeze()``).

Only an input with an axis of length 1 shows it: in the default suite, the case ``length-one``
(one query in a batch of one, output (1, 1, d_v)). Such a result is put back into the output's
shape before the catalogue replays anything, so a mistake in the math beside the squeeze is still
named, and the squeeze is named on its own, for the checks of the cases where it happened. Where some other result has
a shape that is no squeeze of the output's (a flattened result, say), nothing is restored: the
length-1 case then shows the same bad return, not a squeeze.
"""

from __future__ import annotations

from dataclasses import replace

from grader.diagnosis.model import Diagnosis
from grader.observation import Observation
from grader.probes import Probe
from grader.suite import Suite


def output_shape(probe: Probe) -> tuple[int, ...]:
    return (*probe.Q.shape[:-1], probe.V.shape[-1])


def drops_axes(got: tuple[int, ...], expected: tuple[int, ...]) -> bool:
    """Is ``got`` the shape ``expected`` with one or more of its length-1 axes left out, the rest
    in order? (Taking a 1 of ``expected`` as kept or as dropped leaves the same problem, so
    walking the two shapes once decides it.)"""
    if len(got) >= len(expected):
        return False
    at = 0
    for size in expected:
        if at < len(got) and got[at] == size:
            at += 1
        elif size != 1:
            return False
    return at == len(got)


def restore_dropped_axes(suite: Suite, probes: dict[str, Probe], observed: dict[str, Observation], failed: tuple[str, ...]) -> tuple[dict[str, Observation], Diagnosis | None]:
    """The observations with every squeezed result reshaped to the output's shape, and the
    diagnosis naming the squeeze (None where no result dropped an axis)."""
    restored = dict(observed)
    squeezed: list[str] = []
    for name, obs in observed.items():
        value = obs.value
        if obs.status != "returned" or value is None or value.array is None:
            continue
        expected = output_shape(probes[name])
        if value.array.shape == expected:
            continue
        if not drops_axes(tuple(value.array.shape), expected):
            # Another wrong shape (flattened, transposed): a squeeze-like shape elsewhere is that
            # same bad return seen on a length-1 input, not a squeeze.
            return observed, None
        restored[name] = replace(obs, value=replace(value, array=value.array.reshape(expected)))
        squeezed.append(name)
    if not squeezed:
        return observed, None
    first = probes[squeezed[0]]
    got, expected = tuple(observed[squeezed[0]].value.array.shape), output_shape(first)  # type: ignore[union-attr]  # checked above
    cases = {probes[n].case for n in squeezed}
    checks = tuple(c.id for c in suite.checks if c.id in failed and cases.intersection(c.cases))
    message = (
        f"returns shape {got} for Q{tuple(first.Q.shape)}, K{tuple(first.K.shape)}, V{tuple(first.V.shape)}, "
        f"expected {expected}: the axes of length 1 are dropped"
    )
    evidence = {"probe": first.name, "shape": list(got), "expected_shape": list(expected), "probes": squeezed}
    return restored, Diagnosis.of("axis-dropped", message, evidence, checks or failed)
