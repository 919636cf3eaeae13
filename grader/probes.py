"""Probes: the named input triples the worker calls the submission on.

For a stored case, up to two probes:

* ``CASE/values``: the stored Q, K, V; the output is compared with the stored output;
* ``CASE/identity``: the stored Q and K with V = the identity of size T_k. Then
  ``weights @ V = weights``, so the output *is* the attention weight matrix: the weights become
  observable through the public signature, with no hook into the submission.

A masked case has three, each with the case's mask (see :func:`mask_probes`).

Some checks ask more of a probe: ``repeat=2`` calls it twice on fresh copies of the same inputs
(determinism), ``return_inputs`` sends back Q, K and V as they were after the call (mutation).
Asked by several checks, a probe is run once with the union of what they asked.

The ``gradients`` check has a probe of its own per case, ``CASE/gradients``
(:func:`gradient_probe`): the stored Q, K and V (under the case's mask, if it has one) and G, a
fixed random array of the output's shape. The worker calls the function with inputs that
require gradients and sends back the gradients of ``sum(output * G)`` with respect to Q, K and
V, as plain arrays (``grader.sandbox.gradients``). It is a separate call, not a flag on
``CASE/values``: that probe's observation stays a plain call, so a submission that cannot run
under autograd (``q.numpy()``) still has its forward values judged. Gradient probes run after
every other probe, so a backward that hangs or kills the worker costs no forward observation.
Only a PyTorch or JAX worker runs them; a NumPy worker has no autograd and skips them (the check
is absent for NumPy submissions, see ``grader.suite.Suite.for_framework``).

The ``fresh`` check adds cases that exist nowhere on disk: shapes and values are drawn at grading
time by ``numpy.random.default_rng`` from fresh operating-system entropy, never written anywhere,
so a submission that replays stored answers cannot pass them; the last has the shapes of the
batch case again with new values, so one that keeps a result between calls of the same shapes
cannot either (grader.diagnosis.stale). Their values are rounded to the
grid of the stored inputs (``grader.refdata.GRID``), and their expected values are computed in
the grader with the float64 reference (``grader.attention.attention``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from grader.masks import KEEP_ALL, case_mask
from grader.refdata import GRID, CaseData, ReferenceSet
from grader.suite import Shape, Suite, Tolerance

# Which probes each check kind needs for each of its cases: (probe kind, repeat, return_inputs).
NEEDS: dict[str, tuple[tuple[str, int, bool], ...]] = {
    "load": (),
    "shape": (("values", 1, False), ("identity", 1, False)),
    "weights": (("values", 1, False), ("identity", 1, False)),
    "outputs": (("values", 1, False), ("identity", 1, False)),
    "batch": (("values", 1, False), ("identity", 1, False)),
    "cross": (("values", 1, False), ("identity", 1, False)),
    "stability": (("values", 1, False), ("identity", 1, False)),
    "mutation": (("values", 1, True),),
    "determinism": (("values", 2, False),),
    "gradients": (),  # a probe of its own per case: gradient_probe
}
GRADIENTS = "gradients"  # the kind (and name suffix) of a gradient probe
# The seed of G, mixed with the case's own seed: fixed, so the same case always gets the same G,
# and different for every case. Nothing depends on its value but G itself.
GRADIENT_SEED = 0x6772_6164

FRESH_PREFIX = "fresh-"
FRESH_SIZES = (2, 16)  # token and value sizes of fresh cases are drawn from this range (both ends included)
FRESH_DK = (2, 48)  # key sizes from this one: away from the stored head sizes too


@dataclass(frozen=True)
class Probe:
    """One set of inputs the worker calls the function on, from a stored or a fresh case."""

    name: str
    case: str
    kind: str  # "values", "identity"
    Q: np.ndarray
    K: np.ndarray
    V: np.ndarray
    repeat: int = 1
    return_inputs: bool = False
    magnitude: float = 1.0  # the spread of the inputs: large ones test the softmax's stability
    fresh: bool = False  # drawn at grading time: no stored answer exists
    mask: np.ndarray | None = None  # a boolean mask (True = keep) of shape (..., T_q, T_k)
    # For a gradient probe: the weights of the output in the scalar whose gradients the worker sends
    G: np.ndarray | None = None

    @property
    def batched(self) -> bool:
        return self.Q.ndim > 2

    @property
    def gradients(self) -> bool:
        """Whether the worker is to send the gradients of sum(output * G) for this call."""
        return self.G is not None


def identity_values(tk: int, batch: tuple[int, ...]) -> np.ndarray:
    return np.broadcast_to(np.eye(tk), batch + (tk, tk)).copy()


def probe_name(case: str, kind: str) -> str:
    return f"{case}/{kind}"


def _add(probes: dict[str, Probe], probe: Probe) -> None:
    known = probes.get(probe.name)
    if known is None:
        probes[probe.name] = probe
    else:
        probes[probe.name] = replace(known, repeat=max(known.repeat, probe.repeat), return_inputs=known.return_inputs or probe.return_inputs)


def build_probes(suite: Suite, refs: ReferenceSet, fresh_seed: int | None = None) -> list[Probe]:
    """Every probe the suite's checks need, each once, in the order of the checks.

    ``fresh_seed`` is for tests only; by default the fresh cases come from fresh entropy of the
    operating system (``numpy.random.default_rng()``), kept nowhere.
    """
    probes: dict[str, Probe] = {}
    backward: dict[str, Probe] = {}  # gradient probes, sent last
    for check in suite.checks:
        if check.kind == GRADIENTS:
            for case_name in check.cases:
                _add(backward, gradient_probe(refs.cases[case_name]))
            continue
        if check.kind == "fresh":
            # A take-home without batches (groups: {batch: false}) gets single sequences only.
            for probe in fresh_probes(fresh_seed, batched="batch" not in suite.groups_off):
                _add(probes, probe)
            continue
        for case_name in check.cases:
            data = refs.cases[case_name]
            if check.kind == "mask":  # masked cases have their own probes
                for probe in mask_probes(data):
                    _add(probes, probe)
                continue
            shape = data.case.shape
            for kind, repeat, return_inputs in NEEDS[check.kind]:
                V = data.V if kind == "values" else identity_values(shape.tk, shape.batch)
                probe = Probe(probe_name(case_name, kind), case_name, kind, data.Q, data.K, V, repeat, return_inputs, data.case.magnitude)
                _add(probes, probe)
    return list(probes.values()) + list(backward.values())


def gradient_probe(data: CaseData) -> Probe:
    """The stored Q, K and V of a case (under its mask, if any) and a fixed random G of the
    output's shape, rounded to the inputs' grid."""
    shape = data.case.shape
    rng = np.random.default_rng([GRADIENT_SEED, data.case.seed])
    G = np.round(rng.standard_normal(shape.output()) * GRID) / GRID
    name = probe_name(data.case.name, GRADIENTS)
    return Probe(name, data.case.name, GRADIENTS, data.Q, data.K, data.V, magnitude=data.case.magnitude, mask=case_mask(data.case), G=G)


def mask_probes(data: CaseData) -> list[Probe]:
    """A masked case's probes: the stored V and the identity V under the case's mask, and the
    identity V under a mask that keeps everything, which shows what the submission does with no
    key masked on the very same Q and K (the mask diagnoses compare against it)."""
    mask = case_mask(data.case)
    assert mask is not None
    shape = data.case.shape
    identity = identity_values(shape.tk, shape.batch)
    return [
        Probe(probe_name(data.case.name, "values"), data.case.name, "values", data.Q, data.K, data.V, mask=mask),
        Probe(probe_name(data.case.name, "identity"), data.case.name, "identity", data.Q, data.K, identity, mask=mask),
        Probe(probe_name(data.case.name, KEEP_ALL), data.case.name, KEEP_ALL, data.Q, data.K, identity, mask=np.ones_like(mask)),
    ]


def _distinct_sizes(rng: np.random.Generator, batch: tuple[int, ...]) -> Shape:
    """T_q, T_k, d_k and d_v all different, and different from the batch sizes, so that any mix-up
    of two axes shows."""
    while True:
        tq, tk, dv = (int(n) for n in rng.integers(*FRESH_SIZES, size=3, endpoint=True))
        dk = int(rng.integers(*FRESH_DK, endpoint=True))
        sizes = [tq, tk, dk, dv, *batch]
        if len(set(sizes)) == len(sizes):
            return Shape(batch=batch, tq=tq, tk=tk, dk=dk, dv=dv)


def fresh_shapes(rng: np.random.Generator) -> list[Shape]:
    """A single sequence, a batch and a multi-head batch (batch and head counts differ)."""
    b, h = (int(n) for n in rng.choice(np.arange(2, 5), size=2, replace=False))
    return [_distinct_sizes(rng, ()), _distinct_sizes(rng, (b,)), _distinct_sizes(rng, (b, h))]


def fresh_probes(seed: int | None = None, batched: bool = True) -> list[Probe]:
    """The fresh cases' probes; ``seed=None`` (the default) draws them from fresh OS entropy."""
    rng = np.random.default_rng(seed)
    probes = []
    shapes = [shape for shape in fresh_shapes(rng) if batched or not shape.batch]
    # Last, the shapes of the first case again with new values: a result kept from an earlier
    # call with the same shapes (a cache keyed on them, state between calls) answers the new
    # inputs with the old ones' result, which no case of shapes seen only once can show.
    for i, shape in enumerate([*shapes, shapes[min(1, len(shapes) - 1)]], start=1):
        # Rounded to the grid of the stored inputs (see grader.refdata.GRID).
        Q, K, V = (np.round(rng.standard_normal(dims) * GRID) / GRID for dims in (shape.q(), shape.k(), shape.v()))
        case = f"{FRESH_PREFIX}{i}"
        probes.append(Probe(probe_name(case, "values"), case, "values", Q, K, V, fresh=True))
        if i <= len(shapes):
            probes.append(Probe(probe_name(case, "identity"), case, "identity", Q, K, identity_values(shape.tk, shape.batch), fresh=True))
    return probes


# Large inputs make scores of thousands: a correct float32 implementation then differs from the
# float64 reference by more than the suite's tight tolerance (the inputs themselves are ~64 times
# larger), so those probes are judged on finiteness, row sums and this looser closeness.
LARGE_TOLERANCE = Tolerance(rtol=1e-3, atol=1e-4)


def tolerance_for(probe: Probe, tolerance: Tolerance) -> Tolerance:
    """The suite's tolerance, or the looser one for large-input probes."""
    return LARGE_TOLERANCE if probe.magnitude > 1.0 else tolerance
