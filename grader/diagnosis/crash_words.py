"""The words of a crash's fix: the ranks it runs on, or two sizes the code assumes equal.

The ranks: "It runs on 3-D input only and raises ValueError on 2-D and 4-D" (describe.crash).

The sizes: attention ties none of its sizes together but d_k (Q's and K's last axis) and T_k (K's and V's
next-to-last). Code that raises exactly on the inputs where two other sizes differ, and runs on
every input where they are equal, assumes them equal: ``jax.nn.dot_product_attention`` and
``nn.MultiheadAttention`` without ``vdim`` need d_v == d_k; a causal mask or a reshape built from
one length needs T_q == T_k; ``V @ weights`` needs d_v == T_q. Told from the probes' shapes
alone, never from reading the code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from grader.observation import Observation
from grader.probes import Probe


@dataclass(frozen=True)
class Assumption:
    """Two sizes the code takes to be equal, in the words of a crash's message and fix."""

    equal: str  # "d_v == d_k": the evidence's value
    differ: str  # "d_v != d_k"
    why: str
    fix: str


_ASSUMPTIONS: tuple[tuple[Callable[[Probe], bool], Assumption], ...] = (
    (
        lambda p: p.V.shape[-1] == p.Q.shape[-1],
        Assumption(
            "d_v == d_k",
            "d_v != d_k",
            "raises whenever the value size d_v differs from the key size d_k: the code assumes d_v == d_k "
            "(for example jax.nn.dot_product_attention and nn.MultiheadAttention without vdim require it)",
            "compute softmax(Q K^T / sqrt(d_k)) V with the output's last axis taken from V (shape (..., T_q, d_v)), "
            "or give nn.MultiheadAttention vdim=d_v; nothing in attention ties d_v to d_k.",
        ),
    ),
    (
        lambda p: p.Q.shape[-2] == p.K.shape[-2],
        Assumption(
            "T_q == T_k",
            "T_q != T_k",
            "raises whenever the number of queries T_q differs from the number of keys T_k (cross-attention): "
            "the code assumes T_q == T_k (a causal mask or a reshape built from one length)",
            "build the scores as (..., T_q, T_k), with T_q from Q's next-to-last axis and T_k from K's, "
            "and apply no mask unless one is given.",
        ),
    ),
    (
        lambda p: p.V.shape[-1] == p.Q.shape[-2],
        Assumption(
            "d_v == T_q",
            "d_v != T_q",
            "raises whenever the value size d_v differs from the number of queries T_q: the code assumes d_v == T_q, "
            "which is what the last product's operands swapped need (V @ weights, or a transpose of it)",
            "multiply in this order: weights @ V, (..., T_q, T_k) @ (..., T_k, d_v), giving (..., T_q, d_v).",
        ),
    ),
)


def assumed_equal(probes: dict[str, Probe], observed: dict[str, Observation]) -> list[tuple[Assumption, int, int]]:
    """The assumptions that split the stored probes exactly (every probe that raises has the
    sizes different, every probe that returns has them equal), each with how many raise and
    run. The fresh probes' sizes are drawn anew each run: code that reshapes with d_k runs on
    some of them by divisibility alone, and the words must not change from run to run."""
    stored = {n: o for n, o in observed.items() if n in probes and not probes[n].fresh}
    raised = [probes[n] for n, o in stored.items() if o.status == "raised"]
    ran = [probes[n] for n, o in stored.items() if o.status == "returned"]
    if not raised or not ran:
        return []
    return [(a, len(raised), len(ran)) for equal, a in _ASSUMPTIONS if not any(equal(p) for p in raised) and all(equal(p) for p in ran)]


def crash_text(found: list[tuple[Assumption, int, int]], error_type: str) -> tuple[str, str]:
    """The message's addition and the fix, for one or (when the probes cannot tell) two assumptions."""
    first, raised, ran = found[0]
    if len(found) == 1:
        said = f"; raises on the {raised} input{'s' if raised != 1 else ''} with {first.differ}, runs on the {ran} with {first.equal}"
        return said, f"It {first.why}. Instead, {first.fix}"
    assumptions = [a for a, _, _ in found]
    said = f"; raises on the {raised} input{'s' if raised != 1 else ''} with {_and([a.differ for a in assumptions])}, runs on the {ran} with {_and([a.equal for a in assumptions])}"
    fix = (
        f"It raises {error_type} exactly on the inputs where {_and([a.differ for a in assumptions])} (these inputs cannot tell which): "
        f"the code assumes {' or '.join(a.equal for a in assumptions)}. Instead, " + "; and ".join(a.fix[:-1] for a in assumptions) + "."
    )
    return said, fix


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def ranks_text(ranks: list[int]) -> str:
    """[2, 3, 4] as "2-D, 3-D and 4-D"."""
    return _and([f"{r}-D" for r in ranks])
