"""The registry of diagnoses: stable codes and names, each with its why.

A code is never reused or renumbered: reports, gradebooks and CI annotations refer to it. Adding a
diagnosis means adding one Rule here (and the evidence that produces it elsewhere).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Severity = Literal["error", "warning"]


@dataclass(frozen=True)
class Rule:
    code: str
    name: str
    severity: Severity
    title: str  # one line: what the mistake is
    fix: str  # one line: the corrected code or action
    what: str  # what it checks / how it is observed
    why: str  # why it matters: what the mistake does to attention
    example: str  # a typical wrong line
    instead: str  # what to write instead

    def explain(self) -> str:
        return (
            f"{self.code} {self.name} ({self.severity})\n{self.title}\n\n"
            f"What it checks\n  {self.what}\n\n"
            f"Why it matters\n  {self.why}\n\n"
            f"Example\n  {self.example}\n\n"
            f"Use instead\n  {self.instead}\n"
        )


RULES: tuple[Rule, ...] = (
    Rule(
        code="E101",
        name="load-error",
        severity="error",
        title="The submission file cannot be imported.",
        fix="Make the file import cleanly: `python -c \"import submission\"` must succeed.",
        what="The worker imports the file as a module; any exception while doing so (a syntax error, a missing module, sys.exit at import time) is this diagnosis.",
        why="Nothing can be checked until the file loads: every other check is skipped.",
        example="from my_local_utils import softmax   # a module that was not submitted",
        instead="Keep the submission self-contained, define helpers in the same file, and put demos under `if __name__ == \"__main__\":`.",
    ),
    Rule(
        code="E102",
        name="function-missing",
        severity="error",
        title="The file loads but defines no callable with the graded name.",
        fix="Define `def attention(Q, K, V):` at the top level of the file (or grade another name with --function).",
        what="After import, the module must have a callable attribute with the graded name that accepts three positional arguments.",
        why="The grader calls the function by name with (Q, K, V); a different name or a signature that needs more arguments cannot be called.",
        example="def attn(q, k, v): ...",
        instead="def attention(Q, K, V): ...",
    ),
    Rule(
        code="E103",
        name="crash",
        severity="error",
        title="The function raises an exception on valid input.",
        fix="Run the function on the input shape named in the message and fix the line that raises.",
        what="The function is called on well-formed inputs; an exception that no known mistake explains is reported with its type, message, line and the input shape.",
        why="A function that raises on valid input produces no attention at all for that input.",
        example="scores = Q @ K   # (T_q, d_k) @ (T_k, d_k) does not line up",
        instead="scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])",
    ),
    Rule(
        code="E104",
        name="timeout",
        severity="error",
        title="The submission did not finish within the time limit.",
        fix="Remove endless loops and use vectorised numpy; the whole suite needs well under a second.",
        what="The worker process gets a wall-clock limit for loading and all probes; when it passes, the worker and every process it started are killed.",
        why="Attention on these sizes takes microseconds; running out of time means an endless loop, a blocking call, or an algorithm far slower than a few matrix products.",
        example="while not converged: ...",
        instead="Compute the scores, the softmax and the product with V directly, with no iteration.",
    ),
    Rule(
        code="E105",
        name="memory-limit",
        severity="error",
        title="The submission exceeded the memory limit.",
        fix="Do not build arrays larger than the inputs need; (T_q, T_k) scores per batch element are enough.",
        what="The worker runs under an address-space limit; a MemoryError, or a death near the limit, is this diagnosis.",
        why="Attention needs memory of the order of the score matrix; far more means an accidental outer product or a leak.",
        example="big = np.ones((100_000, 100_000))",
        instead="Keep intermediates at the size of the scores (..., T_q, T_k).",
    ),
    Rule(
        code="E106",
        name="bad-return",
        severity="error",
        title="The function returns something that is not an array of the expected shape.",
        fix="Return the numpy array `weights @ V`, of shape (..., T_q, d_v).",
        what="The returned value must be a numeric array with the shape of the output; a list, a scalar, None, a string or a wrong shape with no better explanation is this diagnosis.",
        why="Callers index and multiply the result; anything but an array of the output's shape breaks them.",
        example="return out.tolist()",
        instead="return weights @ V",
    ),
    Rule(
        code="V101",
        name="values-mismatch",
        severity="error",
        title="The values differ from the reference, and no known mistake explains how.",
        fix="Compare your function step by step with softmax(Q K^T / sqrt(d_k)) V on a small input.",
        what="Outputs or weights are compared with stored references; when they differ and no diagnosis in the catalogue reproduces the difference, the mismatch statistics are reported under this name.",
        why="Wrong values are wrong attention, whatever the cause.",
        example="weights = np.exp(scores) / 2",
        instead="weights = softmax(scores, axis=-1)",
    ),
    Rule(
        code="S201",
        name="scale-by-dk",
        severity="error",
        title="The scores are divided by d_k instead of sqrt(d_k).",
        fix="scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(d_k)",
        what="The effective scale is fitted from the returned weights (within a row, log-weight differences are the scale times score differences) and the known mistakes are replayed on the same inputs; this one reproduces the weights with a scale of 1/d_k.",
        why="Dot products of d_k unit-variance entries have a spread of sqrt(d_k); dividing by sqrt(d_k) brings the scores back to unit scale. Dividing by d_k shrinks them a further sqrt(d_k) times, so the softmax rows come out nearly flat: every query attends almost uniformly and the output is close to the mean of the values.",
        example="scores = Q @ K.T / Q.shape[-1]",
        instead="scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])",
    ),
    Rule(
        code="S202",
        name="scale-missing",
        severity="error",
        title="The scores are not scaled at all.",
        fix="scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(d_k)",
        what="The fitted scale of the returned weights is 1, and the reference without a scale reproduces them.",
        why="Unscaled scores have a spread of sqrt(d_k): at a head size of 64 they reach tens, the softmax saturates, rows become nearly one-hot and its gradients vanish.",
        example="weights = softmax(Q @ K.T)",
        instead="weights = softmax(Q @ np.swapaxes(K, -1, -2) / np.sqrt(d_k))",
    ),
    Rule(
        code="T301",
        name="batch-transpose",
        severity="error",
        title="`.T` (or `.transpose()` without axes) on a batched key tensor reverses every axis.",
        fix="Swap only the last two axes: np.swapaxes(K, -1, -2) (or K.transpose(0, 2, 1) for 3-D).",
        what="Batched probes are run: with distinct sizes the reversed keys make matmul raise; with B = T = d it runs and mixes batch elements. The reference with every key axis reversed reproduces both.",
        why="For a batch (B, T, d), `.T` gives (d, T, B), not (B, d, T): the batch axis moves to the end, so either the shapes no longer line up, or, when the sizes happen to be equal, each query is scored against keys of other batch elements with no error at all.",
        example="scores = Q @ K.T / np.sqrt(d_k)",
        instead="scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(d_k)",
    ),
    # ---- issue 6: masks (judged by grader/diagnosis/masks.py; only suites with mask checks) ----
    Rule(
        code="M501",
        name="mask-ignored",
        severity="error",
        title="The mask has no effect: masked keys get the same weight as without it.",
        fix="scores = np.where(mask, scores, -np.inf) before the softmax (True = keep).",
        what="Masked cases (causal, padding) are run with V = identity, so the output is the weight matrix; it is compared with the submission's own weights for the same Q and K under a mask that keeps every key. Identical weights mean the mask was not applied.",
        why="A causal mask keeps a decoder from reading future tokens and a padding mask keeps queries off padding; ignored, the model attends to what it must not see, silently, since the shapes stay right.",
        example="def attention(Q, K, V, mask=None):\n      return softmax(Q @ np.swapaxes(K, -1, -2) / np.sqrt(d_k)) @ V   # mask never used",
        instead="scores = np.where(mask, scores, -np.inf); weights = softmax(scores)",
    ),
    Rule(
        code="M502",
        name="mask-after-softmax",
        severity="error",
        title="The mask is applied to the weights after the softmax, so rows no longer sum to 1.",
        fix="Mask the scores before the softmax: scores = np.where(mask, scores, -np.inf).",
        what="The masked weights equal the unmasked weights with masked keys set to zero and nothing renormalised: masked keys get 0 but each row sums to less than 1.",
        why="Attention weights are a probability distribution over the kept keys. Zeroing them after normalising shrinks every row by the weight that fell on masked keys, so outputs are scaled down unevenly, most for queries that attend most to masked positions.",
        example="weights = softmax(scores) * mask",
        instead="weights = softmax(np.where(mask, scores, -np.inf))",
    ),
    Rule(
        code="M503",
        name="mask-inverted",
        severity="error",
        title="True and False of the mask are swapped: kept keys are masked and masked keys kept.",
        fix="True means keep: scores = np.where(mask, scores, -np.inf) (not np.where(mask, -np.inf, scores)).",
        what="The weights equal the reference's softmax over the keys the mask says to drop, with zero weight on the keys it says to keep.",
        why="Conventions differ (PyTorch's boolean attn_mask uses True = take part, some code uses True = pad); swapped, a causal model reads only the future and a padded batch attends only to padding.",
        example="scores = np.where(mask, -np.inf, scores)",
        instead="scores = np.where(mask, scores, -np.inf)",
    ),
)

BY_NAME: dict[str, Rule] = {rule.name: rule for rule in RULES}
BY_CODE: dict[str, Rule] = {rule.code: rule for rule in RULES}


def lookup(key: str) -> Rule | None:
    """A rule by name or by code (case-insensitive)."""
    return BY_NAME.get(key.lower()) or BY_CODE.get(key.upper())
