"""The catalogue of known mistakes, as variants of the reference.

A variant picks one option on each axis (how the scores are scaled, how they are formed from Q
and K, which axis the softmax normalises, whether it subtracts the maximum, what is returned);
the first option of every axis is the correct reference. Each other option is one named mistake.
Replaying variants on the same inputs as the submission, in the grader's own process, tells which
set of mistakes reproduces what the submission did on every probe, exceptions included.

Scale factors no fixed option covers (a constant, a power of d_k) are fitted from the submission's
weights by the engine and added as extra options of the scale axis for that submission only
(:func:`fitted_scale_option`); the replay then has to confirm them on every probe like any other.

To add a mistake: add an Option to an axis (or a new Axis), whose ``diagnosis`` names a Rule.
An option whose ``combines`` is below :data:`MOST_MISTAKES` appears only in variants with at most
that many mistakes: each new mistake then adds variants in proportion to the axes it meets, not
to their products, and the search for what nothing explains stays as quick as before. Most options
combine with three mistakes (the default); only the common ones combine with four.
"""

from __future__ import annotations

import itertools
from fractions import Fraction
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Sequence

import numpy as np


Array = np.ndarray
Size = Callable[[Array, Array, Array], float]


@dataclass(frozen=True, eq=False)  # compared by identity: two options are never "the same mistake" by value
class Option:
    """One way of writing one step of attention: the correct way, or a known mistake."""

    name: str  # how the option reads in a message: "1/d_k", "K.T", "axis -2"
    diagnosis: str | None  # the Rule name this mistake is reported as; None for the correct option
    # A function for the scale and product axes; for the others the setting the replay reads
    # (the softmax axes, "row" / "none" / "global", "output" / "weights").
    apply: Any
    describe: str = ""  # what the submission does, as a phrase: "divides the scores by d_k"
    also: tuple[str, ...] = ()  # further Rules the same line breaks (1/Q.shape[1]: no root, wrong axis)
    combines: int = 3  # the most mistakes a variant holding this option has (see MOST_MISTAKES)
    # The input ranks (2, 3, 4) on which the option computes what the correct one does: a
    # hard-coded axis or position is right for one rank and wrong (or raising) for another.
    right_on: tuple[int, ...] = ()
    # The axes that may deviate beside this option (empty: any); rank-dependent options meet the
    # common mistakes only, which keeps the tiers they add to small.
    beside: tuple[str, ...] = ()

    @property
    def names(self) -> tuple[str, ...]:
        return (self.diagnosis, *self.also) if self.diagnosis is not None else ()


@dataclass(frozen=True)
class Axis:
    """One step of attention (the scale, the product, ...) and the ways it is written."""

    name: str
    options: tuple[Option, ...]  # the first one is the correct behaviour

    @property
    def default(self) -> Option:
        return self.options[0]


# ---------------------------------------------------------------------------------------------
# Sizes a scale can be taken from. Q.shape[1] is d_k for a single sequence but a token (or head)
# count on a batch: the classic way a 2-D solution goes wrong on 3-D input.

SIZES: dict[str, Size] = {
    "d_k": lambda Q, K, V: Q.shape[-1],
    "T_k": lambda Q, K, V: K.shape[-2],
    "T_q": lambda Q, K, V: Q.shape[-2],
    "d_v": lambda Q, K, V: V.shape[-1],
}


def _inverse_root(size: Size) -> Callable[[Array, Array, Array], float]:
    return lambda Q, K, V: 1.0 / math.sqrt(size(Q, K, V))


def _inverse(size: Size) -> Callable[[Array, Array, Array], float]:
    return lambda Q, K, V: 1.0 / size(Q, K, V)


def _axis_size(array: int, axis: int) -> Size:
    return lambda Q, K, V: (Q, K, V)[array].shape[axis]


def _lifted_size(array: int, axis: int) -> Size:
    """A size read at a fixed position after a single sequence is made a batch of one (x[None])."""
    return lambda Q, K, V: (Q, K, V)[array][None].shape[axis] if (Q, K, V)[array].ndim == 2 else (Q, K, V)[array].shape[axis]


def _rank(Q: Array, K: Array, V: Array) -> float:
    return float(K.ndim)


RANK_BESIDE = ("scale", "product", "softmax", "shift")  # what the rank-dependent products meet

SCALE = Axis(
    "scale",
    (
        Option("1/sqrt(d_k)", None, _inverse_root(SIZES["d_k"])),
        Option("1/d_k", "scale-by-dk", _inverse(SIZES["d_k"]), "divides the scores by d_k", combines=4),
        Option("1", "scale-missing", lambda Q, K, V: 1.0, "does not scale the scores", combines=4),
        Option("1/sqrt(T_k)", "scale-by-seq-len", _inverse_root(SIZES["T_k"]), "divides by sqrt(T_k), the number of keys"),
        Option("1/sqrt(T_q)", "scale-by-seq-len", _inverse_root(SIZES["T_q"]), "divides by sqrt(T_q), the number of queries"),
        Option("1/T_k", "scale-by-seq-len", _inverse(SIZES["T_k"]), "divides by T_k, the number of keys"),
        Option("1/T_q", "scale-by-seq-len", _inverse(SIZES["T_q"]), "divides by T_q, the number of queries"),
        Option("1/sqrt(Q.shape[1])", "scale-by-seq-len", _inverse_root(_axis_size(0, 1)), "divides by sqrt(Q.shape[1]): d_k on a single sequence, a token or head count on a batch", right_on=(2,)),
        Option("1/sqrt(K.shape[1])", "scale-by-seq-len", _inverse_root(_axis_size(1, 1)), "divides by sqrt(K.shape[1]): d_k on a single sequence, a token or head count on a batch", right_on=(2,)),
        Option("1/sqrt(Q.shape[0])", "scale-by-seq-len", _inverse_root(_axis_size(0, 0)), "divides by sqrt(Q.shape[0]) (len(Q)): T_q on a single sequence, the batch size on a batch"),
        Option("1/sqrt(K.shape[0])", "scale-by-seq-len", _inverse_root(_axis_size(1, 0)), "divides by sqrt(K.shape[0]) (len(K)): T_k on a single sequence, the batch size on a batch"),
        Option("1/Q.shape[1]", "scale-by-dk", _inverse(_axis_size(0, 1)), "divides by Q.shape[1]: d_k on a single sequence (with no square root), a token or head count on a batch", ("scale-by-seq-len",)),
        Option("1/K.shape[1]", "scale-by-dk", _inverse(_axis_size(1, 1)), "divides by K.shape[1]: d_k on a single sequence (with no square root), a token or head count on a batch", ("scale-by-seq-len",)),
        Option("sqrt(d_k)", "scale-multiplied", lambda Q, K, V: math.sqrt(Q.shape[-1]), "multiplies the scores by sqrt(d_k)"),
        Option("1/sqrt(d_v)", "scale-by-dv", _inverse_root(SIZES["d_v"]), "divides by sqrt(d_v), the value size"),
        Option("1/d_v", "scale-by-dv", _inverse(SIZES["d_v"]), "divides by d_v, the value size"),
        Option("1/sqrt(V.shape[1])", "scale-by-dv", _inverse_root(_axis_size(2, 1)), "divides by sqrt(V.shape[1]): d_v on a single sequence, a token or head count on a batch", ("scale-by-seq-len",)),
        # Sizes read at a position right for one rank only (Q.shape[2], q.size(2)).
        Option("1/sqrt(Q.shape[2])", "scale-by-seq-len", _inverse_root(_axis_size(0, 2)), "divides by sqrt(Q.shape[2]): d_k on a (B, T, d) batch, T_q on a (B, H, T, d) one, and it raises on a single sequence", right_on=(3,)),
        Option("1/sqrt(Q.shape[2]) of a batch of one", "scale-by-seq-len", _inverse_root(_lifted_size(0, 2)), "divides by sqrt(Q.shape[2]) (a single sequence made a batch of one): d_k on 2-D and 3-D input, T_q on (B, H, T, d)", right_on=(2, 3)),
        # The number of dimensions taken for a size: a constant that depends on the rank.
        Option("1/sqrt(K.ndim)", "scale-constant", lambda Q, K, V: 1.0 / math.sqrt(_rank(Q, K, V)), "divides by sqrt(K.ndim), the number of dimensions of K (2, 3 or 4 by the input's rank), not by sqrt of the key size"),
        Option("1/K.ndim", "scale-constant", lambda Q, K, V: 1.0 / _rank(Q, K, V), "divides by K.ndim, the number of dimensions of K (2, 3 or 4 by the input's rank), not by sqrt of the key size"),
    ),
)


def _dot_reversed(Q: Array, K: Array) -> Array:
    # np.dot on N-D arrays is a tensor product: it sums the last axis of Q against the second-to-last
    # of K.T and keeps every other axis of both, pairing each batch element with each other one.
    return np.dot(Q, K.T)


def _swap01(Q: Array, K: Array) -> Array:
    return np.matmul(Q, np.swapaxes(K, 0, 1))


PRODUCT = Axis(
    "product",
    (
        Option("Q @ swapaxes(K, -1, -2)", None, lambda Q, K: np.matmul(Q, np.swapaxes(K, -1, -2))),
        Option("Q @ K.T", "batch-transpose", lambda Q, K: np.matmul(Q, K.T), "uses K.T, which reverses every axis of a batched K", combines=4, right_on=(2,)),
        Option("np.dot(Q, K.T)", "batch-transpose", _dot_reversed, "uses np.dot(Q, K.T): K.T reverses every axis and np.dot pairs every batch element with every other", combines=4, right_on=(2,)),
        # np.dot for the output too: np.dot(softmax(np.dot(Q, K.T) / s), V).
        Option("np.dot(weights, V) of np.dot(Q, K.T)", "batch-transpose", _dot_reversed, "uses np.dot for both products (np.dot(Q, K.T), then np.dot(weights, V)): on a batch K.T reverses every axis and np.dot pairs every batch element with every other", combines=4, right_on=(2,), beside=(*RANK_BESIDE, "mask")),
        Option("Q @ swapaxes(K, 0, 1)", "batch-transpose", _swap01, "swaps axes 0 and 1 of K (K.transpose(0, 1)), the last two axes of a single sequence only; on a batch it swaps the batch axis instead", combines=2, right_on=(2,), beside=RANK_BESIDE),
    ),
)
DOT_BOTH = PRODUCT.options[3]  # the product whose output is np.dot(weights, V) as well


def output_product(weights: Array, V: Array, product: "Option") -> Array:
    """weights @ V, or np.dot(weights, V) for code that uses np.dot throughout (a stack of weights
    along a new first axis keeps it first either way)."""
    return np.dot(weights, V) if product is DOT_BOTH else np.matmul(weights, V)


@dataclass(frozen=True)
class ByRank:
    """Softmax axes that depend on the input's rank: (rank, axes) pairs, as negative axes; a rank
    not listed raises as numpy does for an axis out of bounds."""

    axes: tuple[tuple[int, tuple[int, ...]], ...]

    def has(self, ndim: int) -> bool:
        return any(rank == ndim for rank, _ in self.axes)

    def at(self, ndim: int) -> tuple[int, ...]:
        for rank, axes in self.axes:
            if rank == ndim:
                return axes
        raise ValueError(f"axis is out of bounds for array of dimension {ndim}")

Norm = tuple[int, ...] | None  # the axes the softmax normalises over; None for every axis
NORMALISE = Axis(
    "softmax",
    (
        Option("axis -1", None, (-1,)),
        Option("axis -2", "softmax-wrong-axis", (-2,), "normalises over axis -2, the queries, instead of the keys"),
        Option("axis 0", "softmax-wrong-axis", (0,), "normalises over axis 0 (the batch, or the queries of a single sequence)"),
        Option("axis 1", "softmax-wrong-axis", (1,), "normalises over axis 1 (the keys of a single sequence, but the queries or heads of a batch)", right_on=(2,)),
        Option("the whole array", "softmax-wrong-axis", None, "normalises over the whole array at once"),
        Option("the last two axes", "softmax-wrong-axis", (-2, -1), "normalises over each whole score matrix at once"),
        Option("no softmax", "softmax-missing", "missing", "uses the scaled scores as weights, with no softmax"),
        # A fixed positive axis: right for one rank only.
        Option("axis 2", "softmax-wrong-axis", ByRank(((3, (-1,)), (4, (-2,)))), "normalises over axis 2: the keys of a (B, T_q, T_k) batch but the queries of (B, H, T_q, T_k), and out of bounds on a single sequence", combines=2, right_on=(3,), beside=("scale",)),
        Option("axis 2 of a batch of one", "softmax-wrong-axis", ByRank(((2, (-1,)), (3, (-1,)), (4, (-2,)))), "normalises over axis 2 (a single sequence made a batch of one): the keys on 2-D and 3-D input, the queries on (B, H, T_q, T_k)", combines=2, right_on=(2, 3), beside=("scale",)),
        Option("torch's implicit dim", "softmax-wrong-axis", ByRank(((2, (-1,)), (3, (-3,)), (4, (-3,)))), "normalises over the axis torch picks when softmax is given no dim (dim 1 for 2-D and 4-D input, dim 0 for 3-D): the keys of a single sequence, the batch on 3-D, the heads on 4-D", combines=2, right_on=(2,), beside=("scale",)),
        # Rarer mistakes: each meets one other mistake at most (combines=2), but for the missing
        # division, which beginners write beside the other common mistakes (see MOST_MISTAKES).
        Option("exp without the sum", "softmax-unnormalised", "unnormalised", "exponentiates the scores but never divides by the row sum", combines=4),
        Option("log-softmax", "softmax-log", "log", "uses the log-softmax (log-weights, x - logsumexp(x)) as the weights", combines=2),
        Option("log of the softmax", "softmax-log", "log-of", "uses the log of the softmax as the weights", combines=2),
    ),
)

SHIFT = Axis(
    "shift",
    (
        Option("row maximum", None, "row"),
        Option("no shift", "softmax-unstable", "none", "takes exp of the scores without subtracting the maximum", combines=4),
        Option("global maximum", "softmax-unstable", "global", "subtracts the maximum of the whole array, so rows far below it underflow to 0/0"),
        # Subtracting a maximum over another axis is no constant within a row: the weights change.
        Option("column maximum", "softmax-wrong-axis", "axis-2", "subtracts the maximum over axis -2 (each column) before the softmax over the keys"),
        Option("axis-0 maximum", "softmax-wrong-axis", "axis0", "subtracts the maximum over axis 0 before the softmax over the keys"),
    ),
)

OUTPUT = Axis(
    "output",
    (
        Option("weights @ V", None, "output"),
        Option("weights", "returns-weights", "weights", "returns the weights instead of weights @ V", combines=4),
    ),
)

# Where the scale factor is applied: to the scores before the softmax, or to the weights after it.
PLACE = Axis(
    "scaled",
    (
        Option("the scores", None, "scores"),
        Option("the weights", "scale-after-softmax", "weights", "applies the scale to the weights after the softmax instead of to the scores before it", combines=2),
    ),
)

MASK = Axis(
    "mask",
    (
        Option("no mask", None, "none"),
        Option("causal", "mask-unasked", "causal", "applies a causal mask (each query sees only keys at or before its position) that no case asked for", combines=4),
        # np.tril multiplied into the weights: the same unasked mask, and rows no longer sum to 1.
        Option("causal after the softmax", "mask-unasked", "causal-after", "zeroes the weights above the diagonal after the softmax (a causal mask that no case asked for, without renormalising the rows)", combines=4),
    ),
)

# Where an integer (floor division, astype(int), an int64 array filled in a loop) cuts off fractions.
INTEGER = Axis(
    "integer",
    (
        Option("floats", None, "none"),
        Option("scores // factor", "integer-truncation", "floor-scores", "floors the scaled scores to whole numbers (floor division)", combines=2),
        Option("int scaled scores", "integer-truncation", "trunc-scores", "truncates the scaled scores to integers", combines=2),
        Option("int dot products", "integer-truncation", "trunc-raw", "truncates the dot products to integers before scaling them", combines=2),
        # Weights cut to integers are not here: below 1 they all become 0, and an output of zeros
        # is no evidence of how it was made (it stays a values mismatch).
        # Alone only: beside a mistake that shrinks the output (a factor after the softmax, a
        # softmax over the whole array) it predicts zeros, which any broken code can return.
        Option("int output", "integer-truncation", "trunc-output", "truncates the output to integers", combines=1),
    ),
)

# The order of the axes is the search order within a tier (the product's order: the first axis
# changes slowest). The axes of the rarer mistakes come first, so a tier tries every variant
# without them, in the order it had before they existed, and then those with them: a submission
# with older mistakes costs what it did, and where two variants give the same results the older
# names win.
AXES: tuple[Axis, ...] = (PLACE, MASK, INTEGER, SCALE, PRODUCT, NORMALISE, SHIFT, OUTPUT)
AXIS_NAMES = tuple(a.name for a in AXES)
POSITION = {name: i for i, name in enumerate(AXIS_NAMES)}
SCALE_AT = POSITION["scale"]
# The order mistakes are reported in: the order of the steps of attention.
READING = tuple(POSITION[name] for name in ("scale", "scaled", "product", "mask", "integer", "softmax", "shift", "output"))


def setting(choice: tuple[Option, ...], axis: str) -> Any:
    """What the option of ``choice`` on ``axis`` applies (its ``apply``)."""
    return choice[POSITION[axis]].apply


def _stacked_axes(axes: tuple[int, ...] | None, ndim: int) -> tuple[int, ...]:
    """Axes of one array, as axes of a stack of such arrays along a new first axis."""
    if axes is None:
        return tuple(range(1, ndim + 1))
    for a in axes:
        if not -ndim <= a < ndim:
            raise ValueError(f"axis {a} is out of bounds for array of dimension {ndim}")
    return tuple(a if a < 0 else a + 1 for a in axes)


def softmax_stack(x: Array, norm: Norm | str, shift: str) -> Array:
    """The softmax as written with one of the known mistakes (or none), applied to each array of
    the stack ``x`` (its first axis) separately: one call replays every scale at once."""
    if norm == "missing":
        return x
    ndim = x.ndim - 1
    kind = norm if isinstance(norm, str) else "softmax"  # unnormalised, log, log-of: over the keys
    if isinstance(norm, ByRank):
        norm = norm.at(ndim)
    axes = _stacked_axes((-1,) if isinstance(norm, str) else norm, ndim)
    if shift == "row":
        x = x - np.max(x, axis=axes, keepdims=True)
    elif shift == "global":
        x = x - np.max(x, axis=_stacked_axes(None, ndim), keepdims=True)
    elif shift == "axis-2":
        x = x - np.max(x, axis=_stacked_axes((-2,), ndim), keepdims=True)
    elif shift == "axis0":
        x = x - np.max(x, axis=_stacked_axes((0,), ndim), keepdims=True)
    if kind == "log":
        return x - np.log(np.sum(np.exp(x), axis=axes, keepdims=True))
    e = np.exp(x)
    if kind == "unnormalised":
        return e
    weights = e / np.sum(e, axis=axes, keepdims=True)
    return np.log(weights) if kind == "log-of" else weights


def causal(shape: tuple[int, ...]) -> Array:
    """The causal mask of a (T_q, T_k) score matrix, True = keep: query i sees keys 0..i."""
    return np.tril(np.ones(shape[-2:], dtype=bool))


def replay_stack(raw: Array, factors: Array, V: Array | None, choice: tuple[Option, ...]) -> Array:
    """Every step after the product Q K^T, for each scale factor of ``factors`` (a stack along a new
    first axis), with the options of ``choice`` (its scale option is not read: ``factors`` are).
    Returns the weights when ``V`` is None, otherwise what the variant returns."""
    integer = setting(choice, "integer")
    after = setting(choice, "scaled") == "weights"
    f = np.asarray(factors, dtype=np.float64).reshape((-1,) + (1,) * raw.ndim)
    x = np.trunc(raw) if integer == "trunc-raw" else raw
    x = x[None] if after else x[None] * f
    if integer == "floor-scores":
        x = np.floor(x)
    elif integer == "trunc-scores":
        x = np.trunc(x)
    mask = setting(choice, "mask")
    if mask == "causal":
        x = np.where(causal(x.shape), x, -np.inf)
    weights = softmax_stack(x, setting(choice, "softmax"), setting(choice, "shift"))
    if after:
        weights = weights * f
    if mask == "causal-after":
        weights = weights * causal(weights.shape)  # as np.tril multiplies: NaN stays NaN
    if V is None or setting(choice, "output") == "weights":
        return weights
    out = output_product(weights, V, choice[POSITION["product"]])
    return np.trunc(out) if integer == "trunc-output" else out


def softmax_variant(x: Array, norm: Norm | str, shift: str) -> Array:
    """The softmax of one array as written with one of the known mistakes (or none)."""
    return softmax_stack(x[None], norm, shift)[0]


@dataclass(frozen=True)
class Variant:
    """An attention as written with one option on every axis: the reference, or up to four mistakes."""

    choice: tuple[Option, ...]  # one option per axis, in AXES order
    deviations: tuple[Option, ...] = field(init=False, repr=False, compare=False)  # in READING order
    scale: Option = field(init=False, repr=False, compare=False)
    others: tuple[Option, ...] = field(init=False, repr=False, compare=False)  # every option but the scale

    def __post_init__(self) -> None:
        # Asked for thousands of times per search: computed once.
        object.__setattr__(self, "deviations", tuple(self.choice[i] for i in READING if self.choice[i] is not AXES[i].default))
        object.__setattr__(self, "scale", self.choice[SCALE_AT])
        object.__setattr__(self, "others", self.choice[:SCALE_AT] + self.choice[SCALE_AT + 1 :])

    @property
    def is_reference(self) -> bool:
        return not self.deviations

    @property
    def diagnoses(self) -> tuple[str, ...]:
        """The distinct rule names of the mistakes, in axis order."""
        names: list[str] = []
        for o in self.deviations:
            names += [n for n in o.names if n not in names]
        return tuple(names)

    def option(self, axis: str) -> Option:
        return self.choice[AXIS_NAMES.index(axis)]

    def label(self) -> str:
        return " + ".join(o.diagnosis or o.name for o in self.deviations) or "reference"

    def scores(self, Q: Array, K: Array, V: Array) -> Array:
        scale = float(self.option("scale").apply(Q, K, V))
        return np.asarray(self.option("product").apply(Q, K)) * scale

    def _replay(self, Q: Array, K: Array, V: Array | None) -> Array:
        scale = float(self.option("scale").apply(Q, K, V))
        raw = np.asarray(self.option("product").apply(Q, K))
        return replay_stack(raw, np.array([scale]), V, self.choice)[0]

    def weights(self, Q: Array, K: Array, V: Array) -> Array:
        """The weight matrix of this variant (what it multiplies V by)."""
        return self._replay(Q, K, None)

    def finish(self, weights: Array, V: Array) -> Array:
        if self.option("output").apply == "weights":
            return weights
        out = output_product(weights, V, self.option("product"))
        return np.trunc(out) if self.option("integer").apply == "trunc-output" else out

    def __call__(self, Q: Array, K: Array, V: Array) -> Array:
        """The output of this variant; raises like numpy would where the mistake breaks shapes."""
        return self._replay(Q, K, V)


def _meaningful(choice: tuple[Option, ...]) -> bool:
    """Leave out combinations that are the same computation as a simpler one, and those with
    more mistakes than one of their options combines with."""
    mistakes = sum(o is not a.default for o, a in zip(choice, AXES))
    if any(o.combines < mistakes for o, a in zip(choice, AXES) if o is not a.default):
        return False
    wrong = {a.name for o, a in zip(choice, AXES) if o is not a.default}
    if any(o.beside and not wrong <= {a.name, *o.beside} for o, a in zip(choice, AXES)):
        return False
    ranks = [set(o.right_on) for o in choice if o.right_on]
    if len(ranks) > 1 and not set.intersection(*ranks):
        return False  # written for one rank here, another there: right on none, nothing to read from it
    norm, shift = choice[POSITION["softmax"]], choice[POSITION["shift"]]
    scale, after = choice[POSITION["scale"]], setting(choice, "scaled") == "weights"
    integer, output = setting(choice, "integer"), setting(choice, "output")
    if after and (scale.diagnosis == "scale-missing" or norm.apply == "missing"):
        return False  # a factor of 1, or no softmax: after is the same as before
    if norm.apply == "missing" and setting(choice, "mask") == "causal":
        return False  # -inf as a weight: nan everywhere
    if integer == "trunc-output" and output == "weights":
        return False  # the output is the weights: cut to integers, zeros (see INTEGER)
    if norm.apply in ("log", "log-of") and shift.apply in ("none", "global"):
        return False  # -inf where the shifted sum overflows or underflows: as the log of a softmax gives on large scores
    if norm.apply == "missing" and shift is not SHIFT.default:
        return False  # no softmax: there is nothing to shift
    if (norm.apply is None or norm.apply == (-2, -1)) and shift.apply == "global":
        return False  # over the whole array (or each whole matrix), the global maximum is (nearly) the right one
    if (norm.apply, shift.apply) in (((-2,), "axis-2"), ((0,), "axis0")):
        return False  # the maximum over the axis it normalises: the row shift of that softmax
    return True


# The catalogue's variants have up to this many mistakes. Four only of the options with
# combines=4: the common mistakes (no scale or d_k, K.T and np.dot, no max-shift, an unasked causal
# mask, no division by the row sum, the weights returned), which beginners write together. That
# tier is small (78 variants) and made only when no variant of three explains a probe. Every three
# of its mistakes are a variant of three as well, so a group that three explain is never given a
# fourth mistake that nothing shows.
MOST_MISTAKES = 4


def variants_with(count: int, axes: tuple[Axis, ...] = AXES) -> list[Variant]:
    """Every variant with exactly ``count`` mistakes, in the order of the options (the more
    common mistake first)."""
    # Only the choices with this many mistakes are made: which axes deviate, then their wrong
    # options. Sorted by position in the product of every axis's options, the order a filter
    # over itertools.product would give.
    found: list[tuple[int, tuple[Option, ...]]] = []
    for wrong in itertools.combinations(range(len(axes)), count):
        # Options that combine with fewer mistakes are left out before the product, not after it.
        ranges = [[k for k in range(1, len(a.options)) if a.options[k].combines >= count] if i in wrong else range(1) for i, a in enumerate(axes)]
        for picks in itertools.product(*ranges):
            choice = tuple(a.options[k] for a, k in zip(axes, picks))
            if _meaningful(choice):
                position = 0
                for a, k in zip(axes, picks):
                    position = position * len(a.options) + k
                found.append((position, choice))
    found.sort(key=lambda item: item[0])
    return [Variant(choice) for _, choice in found]


def build_variants(axes: tuple[Axis, ...] = AXES, max_deviations: int = MOST_MISTAKES) -> list[Variant]:
    """Every variant with at most ``max_deviations`` mistakes: fewest mistakes first."""
    return [v for count in range(max_deviations + 1) for v in variants_with(count, axes)]


_TIERS: dict[int, list[Variant]] = {}


def tier(count: int) -> list[Variant]:
    """The catalogue's variants with ``count`` mistakes (made on first use, then kept)."""
    found = _TIERS.get(count)
    if found is None:
        found = _TIERS[count] = variants_with(count)
    return found


class Catalogue:
    """The catalogue in search order, fewest mistakes first, plus ``extra`` variants (fitted to one
    submission), each after the catalogue's variants with as many mistakes.

    Iterating makes each tier (a number of mistakes) only when reached: a search that stops at
    two mistakes, as most do, never makes the 2082 variants with three, nor the 78 with four."""

    def __init__(self, extra: Sequence[Variant] = ()) -> None:
        self.extra: dict[int, list[Variant]] = {}
        for variant in extra:
            self.extra.setdefault(len(variant.deviations), []).append(variant)

    def __iter__(self) -> Iterator[Variant]:
        for count in range(max([MOST_MISTAKES, *self.extra]) + 1):
            if count <= MOST_MISTAKES:
                yield from tier(count)
            yield from self.extra.get(count, ())


def all_variants() -> Catalogue:
    """The fixed catalogue, fewest mistakes first."""
    return Catalogue()


def with_scale(variant: Variant, option: Option) -> Variant:
    return Variant(variant.choice[:SCALE_AT] + (option,) + variant.choice[SCALE_AT + 1 :])


REFERENCE = Variant(tuple(a.default for a in AXES))


# ---------------------------------------------------------------------------------------------
# Fitted scales


def power_text(p: float) -> str:
    """An exponent as a short fraction where it is one: -0.25 -> "-1/4". The nearest fraction
    with a denominator up to 8, if within 0.01."""
    near = Fraction(p).limit_denominator(8)
    if abs(float(near) - p) >= 0.01:
        return f"{p:.3g}"
    return str(near)


def formula(size: str, c: float, p: float) -> str:
    """c * size^p as a reader would write it: "d_k^-1/4", "2 * d_k^-1/2", "0.125"."""
    if abs(p) < 0.01:
        return f"{c:.4g}"
    body = f"{size}^{power_text(p)}"
    return body if abs(c - 1.0) < 0.01 else f"{c:.4g} * {body}"


def fitted_scale_table(table: dict[int, float], shown: set[int] | None = None) -> Option:
    """A scale fitted separately at each d_k, when it is a function of d_k but no power law.
    ``shown``: the d_k to list in the description (those of stored cases, the same every run)."""
    listing = ", ".join(f"{scale:.4g} at d_k = {dk}" for dk, scale in sorted(table.items()) if shown is None or dk in shown)
    return Option("fitted per d_k", "scale-other", lambda Q, K, V: table.get(Q.shape[-1], math.nan), f"scales by a factor that depends on d_k but is no power of it ({listing})")


def fitted_scale_option(size: str | None, c: float, p: float) -> Option:
    """A scale option fitted from the submission: a constant c (size None) or c * size^p."""
    if size is None:
        return Option(f"{c:.4g}", "scale-constant", lambda Q, K, V: c, f"scales by the constant {c:.4g} whatever d_k is")
    measure = SIZES[size]
    diagnosis = {"d_k": "scale-other", "T_k": "scale-by-seq-len", "T_q": "scale-by-seq-len", "d_v": "scale-by-dv"}[size]
    text = formula(size, c, p)
    return Option(text, diagnosis, lambda Q, K, V: c * float(measure(Q, K, V)) ** p, f"scales by {text}")
