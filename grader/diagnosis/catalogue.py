"""The catalogue of known mistakes, as variants of the reference.

A variant picks one option on each axis (how the scores are scaled, how the keys are transposed,
...); the default option of every axis is the correct reference. Each non-default option is one
named mistake. Replaying variants on the same inputs as the submission, in the grader's own
process, tells which set of mistakes reproduces what the submission did on every probe.

To add a mistake: add an Option to an axis (or a new Axis), whose ``diagnosis`` names a Rule.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from grader.attention import softmax

Array = np.ndarray
ScaleFn = Callable[[Array, Array, Array], float]
KeysFn = Callable[[Array], Array]


@dataclass(frozen=True)
class Option:
    name: str
    diagnosis: str | None  # the Rule name this mistake is reported as; None for the correct option
    apply: Callable[..., object]
    describe: str = ""


@dataclass(frozen=True)
class Axis:
    name: str
    options: tuple[Option, ...]  # the first one is the correct behaviour

    @property
    def default(self) -> Option:
        return self.options[0]


def _sqrt_dk(Q: Array, K: Array, V: Array) -> float:
    return 1.0 / math.sqrt(Q.shape[-1])


SCALE = Axis(
    "scale",
    (
        Option("1/sqrt(d_k)", None, _sqrt_dk),
        Option("1/d_k", "scale-by-dk", lambda Q, K, V: 1.0 / Q.shape[-1], "divides by d_k"),
        Option("1", "scale-missing", lambda Q, K, V: 1.0, "does not scale"),
    ),
)

KEYS = Axis(
    "keys",
    (
        Option("swap last two axes", None, lambda K: np.swapaxes(K, -1, -2)),
        Option("reverse all axes (.T)", "batch-transpose", lambda K: K.T, "reverses every axis of K"),
    ),
)

AXES: tuple[Axis, ...] = (SCALE, KEYS)


@dataclass(frozen=True)
class Variant:
    choice: tuple[Option, ...]  # one option per axis, in AXES order

    @property
    def deviations(self) -> tuple[Option, ...]:
        return tuple(o for o, axis in zip(self.choice, AXES) if o is not axis.default)

    @property
    def is_reference(self) -> bool:
        return not self.deviations

    def option(self, axis: str) -> Option:
        return self.choice[[a.name for a in AXES].index(axis)]

    def label(self) -> str:
        return " + ".join(o.diagnosis or o.name for o in self.deviations) or "reference"

    def __call__(self, Q: Array, K: Array, V: Array) -> Array:
        """The output of this variant; raises like numpy would where the mistake breaks shapes."""
        scale = float(self.option("scale").apply(Q, K, V))  # type: ignore[arg-type]
        keys = self.option("keys").apply(K)
        scores = np.matmul(Q, keys) * scale
        return np.matmul(softmax(scores, axis=-1), V)


def all_variants(max_deviations: int = 3) -> list[Variant]:
    """Every variant with at most ``max_deviations`` mistakes, fewest mistakes first."""
    variants = [Variant(choice) for choice in itertools.product(*(a.options for a in AXES))]
    variants = [v for v in variants if len(v.deviations) <= max_deviations]
    return sorted(variants, key=lambda v: len(v.deviations))


REFERENCE = Variant(tuple(a.default for a in AXES))
