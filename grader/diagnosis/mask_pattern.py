"""mask-unasked seen directly: weights of exactly 0 in the shape of a causal mask, of any offset.

The catalogue replays the causal mask itself (query i keeps keys 0..i). A mask one off
(``np.tril(..., k=-1)``, which hides the diagonal too, or ``tril(diagonal=1)``, which leaks a
future key), or one with a key always kept, reproduces no variant, yet shows plainly in the
weights: with no mask asked for, a softmax of these inputs gives every key some weight, and this
code gives each query exactly 0 from some key to the last, a later query no earlier than the one
before. That pattern, on every unmasked identity probe with more than one query and key, is named when
nothing else explains the failures.
"""

from __future__ import annotations

import numpy as np

from grader.diagnosis.model import Diagnosis
from grader.observation import Observation
from grader.probes import Probe


def _first_zeros(weights: np.ndarray) -> np.ndarray | None:
    """Per row of (..., T_q, T_k) weights: the first key of its run of exact zeros that reaches
    the last key (T_k for a row with none), if every zero of the row is in that run."""
    zero = weights == 0
    tk = weights.shape[-1]
    # The run of zeros at the end of each row: its length is where a reversed cumulative product ends.
    trailing = np.cumprod(zero[..., ::-1], axis=-1).sum(axis=-1)
    first = tk - trailing
    if np.any(zero.sum(axis=-1) != trailing):  # a zero before the run: not a mask of this shape
        return None
    return first


def unasked_mask(probes: dict[str, Probe], observed: dict[str, Observation], failed: tuple[str, ...]) -> Diagnosis | None:
    """The diagnosis when the unmasked identity probes' weights show a causal-like mask: each of
    them, or (where the mask cannot reach its keys) none of its keys masked."""
    shown: list[tuple[str, np.ndarray, int]] = []  # probe, first masked key per query, T_k
    unmasked: list[int] = []  # T_k of each probe with no key masked at all
    for name, probe in probes.items():
        if probe.kind != "identity" or probe.mask is not None or probe.magnitude > 1.0 or min(probe.Q.shape[-2], probe.K.shape[-2]) < 2:
            continue
        obs = observed.get(name)
        value = None if obs is None else obs.value
        if value is None or value.array is None or value.array.shape != (*probe.Q.shape[:-1], probe.K.shape[-2]):
            return None
        weights = value.array.astype(np.float64)
        first = _first_zeros(weights)
        if first is None or np.any(first == 0):  # a zero out of place, or a row masked whole
            return None
        # In each sequence the first masked key moves right (or stays) from one query to the next.
        # A row with none (a query past the mask's reach, or one whose every key was masked with
        # a finite fill, which comes out uniform) is skipped.
        tk = weights.shape[-1]
        if any(np.any(np.diff(row[row < tk]) < 0) for row in first.reshape(-1, first.shape[-1])):
            return None
        if np.any(first < tk):
            shown.append((name, first, tk))
        else:
            unmasked.append(tk)
    if sum(int(np.count_nonzero(f < tk)) for _, f, tk in shown) < 2:
        return None
    offsets = {int(o) for _, f, tk in shown for row in f.reshape(-1, f.shape[-1]) for o in (row - np.arange(1, row.size + 1))[row < tk]}
    # A probe with no key masked fits only a mask whose reach ends past its keys: one offset
    # o, and T_k <= 1 + o (query 0 keeps keys 0..o).
    if unmasked and (len(offsets) != 1 or max(unmasked) > 1 + next(iter(offsets))):
        return None
    # A stored case (the report can draw its weights), the one with the most queries.
    name, first, tk = max(shown, key=lambda s: (not probes[s[0]].fresh, s[1].shape[-1]))
    rows = first.reshape(-1, first.shape[-1])[0]
    kept = ", ".join(f"query {i} keys 0..{int(f) - 1}" if f < tk else f"query {i} every key" for i, f in enumerate(rows[:4]))
    message = f"{name}: weights exactly 0 from some key to the last in every row, later queries no earlier ({kept}{', ...' if rows.size > 4 else ''}): a causal-like mask no case asked for"
    if len(offsets) == 1:
        offset = offsets.pop()
        message += f", off by {offset:+d} from the causal mask" if offset else ""
    evidence = {"probe": name, "first_masked_key": [int(f) for f in rows], "replayed": False}
    return Diagnosis.of("mask-unasked", message, evidence, failed)
