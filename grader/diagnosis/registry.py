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
    """A diagnosis the grader can give: its code, name, severity, explanation and fix."""

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
        code="V102",
        name="integer-truncation",
        severity="error",
        title="Floor division or an integer dtype cuts the fractional part off the scores, the weights or the output.",
        fix="Divide with `/` and keep floating point: scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(d_k), with no astype(int) or dtype=int buffers.",
        what="The replay tries the reference with the scaled scores floored (`//`) or truncated (`astype(int)`), with the dot products truncated before scaling, and with the output truncated. Weights cut to integers are not among them: nearly all become 0, and an output of zeros shows nothing about how it was made, so it stays a values mismatch. The variant that reproduces every probe is named, with its figures: the share of whole numbers among the returned values, or the log-weight differences within a row that have become whole multiples of the step.",
        why="Scores, weights and outputs are real numbers: the weights are fractions by nature (a row sums to 1), so cast to integers they are almost all 0 and the output vanishes; floored scores make the softmax jump in steps of e, so nearby keys get identical or wildly different weights. An int64 buffer filled in a loop does this silently, since numpy casts each assignment without a warning.",
        example="scores = Q @ K.T // np.sqrt(d_k)   # or out = np.zeros((T_q, d_v), dtype=int)",
        instead="scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(d_k); out = np.zeros((T_q, d_v), dtype=Q.dtype)",
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
        code="S203",
        name="scale-by-seq-len",
        severity="error",
        title="The scale comes from the number of tokens (T_q or T_k, or its square root), not from d_k.",
        fix="scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])   # the feature size, the last axis",
        what="Probes with T_q, T_k, d_k and d_v all different are replayed: the weights are reproduced by a scale of 1/sqrt(T) or 1/T for the query or key count, or by sqrt(Q.shape[1]), which is d_k on a single sequence but a token (or head) count on a batch.",
        why="The spread of a dot product grows with the number of terms summed, d_k, not with how many tokens there are. A token count makes the sharpness of attention depend on the sequence length: the same query attends differently to the same keys in a longer sentence. `Q.shape[1]` is the last axis only for 2-D input, so it passes single-sequence tests and silently goes wrong on a batch.",
        example="scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(K.shape[-2])   # or np.sqrt(Q.shape[1]) on (B, T, d)",
        instead="scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])",
    ),
    Rule(
        code="S204",
        name="scale-multiplied",
        severity="error",
        title="The scores are multiplied by sqrt(d_k) instead of divided by it.",
        fix="scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(d_k)",
        what="The fitted scale of the returned weights is sqrt(d_k) rather than 1/sqrt(d_k), and the reference with the scores multiplied by sqrt(d_k) reproduces every probe.",
        why="Multiplying makes the scores d_k times too large: at a head size of 64 they reach the hundreds, the softmax is one-hot, and attention picks a single key with no gradient to learn from.",
        example="scores = Q @ K.T * np.sqrt(d_k)",
        instead="scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(d_k)",
    ),
    Rule(
        code="S205",
        name="scale-by-dv",
        severity="error",
        title="The scale uses the value size d_v (V.shape[-1]) instead of the key size d_k.",
        fix="scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])",
        what="Cases with d_v different from d_k are replayed; the weights match a scale of 1/sqrt(d_v) (or 1/d_v). Where d_v equals d_k the submission is right, which is why self-attention tests with equal sizes do not catch it.",
        why="The scores are sums of d_k products of queries and keys; the values play no part in them. Using d_v gives a right answer only when the two sizes happen to agree.",
        example="scores = Q @ K.T / np.sqrt(V.shape[-1])",
        instead="scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])",
    ),
    Rule(
        code="S206",
        name="scale-constant",
        severity="error",
        title="The scale is a fixed number (such as 1/8 for a head size of 64) whatever d_k is.",
        fix="scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])",
        what="The effective scale is fitted separately on cases with different d_k; it comes out the same number on all of them, and the reference with that constant scale reproduces every probe.",
        why="A constant is right for one head size only (8 = sqrt(64)); for every other d_k the rows come out too flat or too peaked. Head sizes change between models and layers, so the constant silently breaks there.",
        example="scores = Q @ K.T / 8.0",
        instead="scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])",
    ),
    Rule(
        code="S207",
        name="scale-other",
        severity="error",
        title="The scores are scaled by a factor that is none of the known mistakes; the fitted factor is reported.",
        fix="scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])",
        what="The effective scale is fitted on cases with different d_k and described as a formula of d_k where one fits (for example d_k^-1/4); the reference with that factor reproduces every probe.",
        why="Only 1/sqrt(d_k) brings dot products of d_k unit-variance terms back to unit variance; any other power or factor leaves the softmax too flat or too peaked, more so as d_k grows.",
        example="scores = Q @ K.T / d_k ** 0.25",
        instead="scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])",
    ),
    Rule(
        code="S208",
        name="scale-after-softmax",
        severity="error",
        title="The factor is applied to the weights after the softmax instead of to the scores before it.",
        fix="weights = softmax(Q @ np.swapaxes(K, -1, -2) / np.sqrt(d_k))   # scale inside the softmax",
        what="With V = identity the output is the weight matrix: its rows sum to the factor (1/sqrt(d_k), or sqrt(d_k) when it is multiplied) instead of 1, while the shape of each row is that of a softmax of unscaled scores; the reference with the factor moved behind the softmax reproduces every probe.",
        why="The factor exists to set how sharp the softmax is: it must act on the scores. Applied afterwards it leaves the softmax as sharp as with no scale at all (saturating as d_k grows) and in addition shrinks (or inflates) every output by the same factor, so the output is no longer an average of the values.",
        example="weights = softmax(Q @ K.T) / np.sqrt(d_k)",
        instead="weights = softmax(Q @ np.swapaxes(K, -1, -2) / np.sqrt(d_k))",
    ),
    Rule(
        code="T301",
        name="batch-transpose",
        severity="error",
        title="`.T`, `.transpose()` without axes or `np.dot` on a batched key tensor: every axis is reversed.",
        fix="Swap only the last two axes: np.swapaxes(K, -1, -2), right for any number of leading axes.",
        what="Batched probes are run: with distinct sizes the reversed keys make matmul (or np.dot) raise; with B = T = d it runs and mixes batch elements. The reference with every key axis reversed (and, for np.dot, numpy's dot over the last axis of Q and the second-to-last of K.T) reproduces every probe.",
        why="For a batch (B, T, d), `.T` gives (d, T, B), not (B, d, T): the batch axis moves to the end, so either the shapes no longer line up, or, when the sizes happen to be equal, each query is scored against keys of other batch elements with no error at all. np.dot on N-D arrays is not a batched product either: it pairs every batch element with every other.",
        example="scores = Q @ K.T / np.sqrt(d_k)",
        instead="scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(d_k)",
    ),
    Rule(
        code="N401",
        name="softmax-wrong-axis",
        severity="error",
        title="The softmax normalises over the wrong axis: the queries, the batch, or the whole matrix instead of the keys.",
        fix="weights = softmax(scores, axis=-1)   # each query's row over the keys sums to 1",
        what="With V = identity the output is the weight matrix: its rows must each sum to 1. The row and column sums are measured, and the reference with the softmax over axis -2, axis 0, axis 1, each whole matrix or the whole array reproduces the weights. Subtracting a maximum taken over another axis than the sum's (x - x.max(axis=-2) before a sum over the keys) is this mistake too: that shift is not constant within a row, so the rows sum to 1 but the weights are wrong.",
        why="Each query must distribute one unit of attention over the keys. Normalising over queries makes each key distribute attention over the queries instead; over the whole matrix or the batch, rows no longer sum to 1 and the output's scale depends on how many other queries or batch elements there are.",
        example="e = np.exp(x - x.max(axis=0)); return e / e.sum(axis=0)",
        instead="e = np.exp(x - x.max(axis=-1, keepdims=True)); return e / e.sum(axis=-1, keepdims=True)",
    ),
    Rule(
        code="N402",
        name="softmax-missing",
        severity="error",
        title="No softmax: the scaled scores are used as weights directly.",
        fix="weights = softmax(scores, axis=-1); return weights @ V",
        what="The weights (V = identity) equal the scaled scores themselves: they take negative values and their rows do not sum to 1; the reference without a softmax reproduces every probe.",
        why="Attention weights must be a probability distribution over the keys (non-negative, summing to 1). Raw scores mix the values with arbitrary signs and sizes, so the output is not an average of the values at all.",
        example="return (Q @ K.T / np.sqrt(d_k)) @ V",
        instead="return softmax(Q @ np.swapaxes(K, -1, -2) / np.sqrt(d_k), axis=-1) @ V",
    ),
    Rule(
        code="N403",
        name="softmax-unstable",
        severity="error",
        title="The softmax does not subtract the row maximum, so large scores overflow to inf and nan.",
        fix="e = np.exp(scores - scores.max(axis=-1, keepdims=True)); weights = e / e.sum(axis=-1, keepdims=True)",
        what="A case with scores in the thousands is run: a stable softmax stays finite with rows summing to 1; this one returns inf or nan, exactly as the reference without the max shift does (a shift by the maximum of the whole array instead of each row underflows the same way).",
        why="exp overflows above about 709 in float64 (88 in float32). Subtracting each row's maximum changes nothing mathematically and keeps every exponent at or below 0; without it one large score turns the whole row into nan.",
        example="e = np.exp(x); return e / e.sum(axis=-1, keepdims=True)",
        instead="e = np.exp(x - x.max(axis=-1, keepdims=True)); return e / e.sum(axis=-1, keepdims=True)",
    ),
    Rule(
        code="N404",
        name="softmax-unnormalised",
        severity="error",
        title="The scores are exponentiated but never divided by the row sum.",
        fix="e = np.exp(scores - scores.max(axis=-1, keepdims=True)); weights = e / e.sum(axis=-1, keepdims=True)",
        what="With V = identity the weights are positive but their rows do not sum to 1; after a max shift each row's largest weight is exactly 1 (exp(0)). The reference that stops after np.exp (with or without the shift) reproduces every probe.",
        why="Without the division the weights are not a distribution: each output is a sum of values scaled by numbers that depend on how large the scores happen to be, not an average, and its size changes with the number of keys and the shift.",
        example="weights = np.exp(scores - scores.max(axis=-1, keepdims=True))",
        instead="e = np.exp(scores - scores.max(axis=-1, keepdims=True)); weights = e / e.sum(axis=-1, keepdims=True)",
    ),
    Rule(
        code="N405",
        name="softmax-log",
        severity="error",
        title="The log-softmax (log-weights) is used as the weights.",
        fix="weights = np.exp(log_weights)   # or softmax(scores, axis=-1) directly",
        what="With V = identity every weight is at most 0, and the exponentials of each row sum to 1: these are log-probabilities. The reference with a log-softmax (x - logsumexp(x), or np.log of the softmax) in place of the softmax reproduces every probe.",
        why="A log-softmax is the right quantity for a loss, not for mixing values: the weights of attention must be non-negative and sum to 1. Log-weights are negative, so each output is a negative-weighted sum of the values, of a size that grows with the number of keys.",
        example="weights = scores - logsumexp(scores, axis=-1, keepdims=True)",
        instead="weights = np.exp(scores - logsumexp(scores, axis=-1, keepdims=True))",
    ),
    Rule(
        code="R501",
        name="returns-weights",
        severity="error",
        title="The function returns the attention weights instead of weights @ V.",
        fix="return weights @ V",
        what="The returned array has the shape of the weights (..., T_q, T_k) and equals them; with V = identity it looks right (the output is the weights there), so only probes with a real V show it.",
        why="Attention's output is the weighted average of the values; the weights are only the coefficients. Downstream layers expect (..., T_q, d_v).",
        example="return softmax(scores)",
        instead="return softmax(scores) @ V",
    ),
    Rule(
        code="R502",
        name="input-mutated",
        severity="error",
        title="The function changes the caller's Q, K or V in place.",
        fix="Q = Q / np.sqrt(d_k)   # a new array, not Q /= ...",
        what="After the call the worker sends back the arrays the function was given; they are compared with what was sent. In-place operators (`/=`, `*=`, `-=`), slice assignment or `out=` on an argument change them.",
        why="The caller still owns Q, K and V: in a transformer the same K and V are reused by later steps and heads. A silent in-place change corrupts them, and calling the function twice gives a different answer.",
        example="Q /= np.sqrt(d_k)",
        instead="Q = Q / np.sqrt(d_k)",
    ),
    Rule(
        code="R503",
        name="nondeterministic",
        severity="error",
        title="Two calls with the same inputs give different results.",
        fix="Remove dropout and random noise from inference, or make them optional and off by default.",
        what="Some probes are called twice, each time on fresh copies of the same inputs; the two results must agree within the tolerance.",
        why="Attention is a function: the same inputs must give the same output. Unseeded dropout or noise makes results irreproducible and every comparison with a reference meaningless.",
        example="weights = weights * (np.random.rand(*weights.shape) > 0.1) / 0.9",
        instead="def attention(Q, K, V, dropout=0.0): ...   # off unless asked for",
    ),
    Rule(
        code="H601",
        name="hardcoded",
        severity="error",
        title="Passes the stored cases but fails fresh inputs generated at grading time.",
        fix="Compute the result from Q, K and V for any input; do not special-case known inputs or shapes.",
        what="Besides the stored cases, the grader draws fresh random cases at grading time from a seed that is never stored, with shapes of its own, and computes their expected values itself. Every stored case matches but the fresh ones do not.",
        why="A function that is right only on the inputs it was tested with (stored answers, a lookup of known shapes) is not an implementation of attention.",
        example="if Q.shape == (3, 4): return KNOWN_ANSWER",
        instead="return softmax(Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1]), axis=-1) @ V",
    ),
    Rule(
        code="W701",
        name="reduced-precision",
        severity="warning",
        title="The result is computed in single (or lower) precision.",
        fix="Compute in float64 when the inputs are float64 (leave out astype(np.float32)), or accept the rounding.",
        what="The returned dtype is narrower than float64 (said beside any other diagnosis, since it explains part of a difference), or float64 values differ from the float64 reference by more than float64 rounding explains while staying within the tolerance.",
        why="Single precision is usual on GPUs and passes the tolerance; it is reported so that a reader knows where differences of about 1e-7 come from. It fails nothing by itself; half precision (float16, about 1e-3) does not meet the tolerance, and the values mismatch says so.",
        example="Q = Q.astype(np.float32)",
        instead="keep the input dtype: scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])",
    ),
    # ---- masks (judged by grader/diagnosis/masks.py; only suites with mask checks) ----
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
    Rule(
        code="M504",
        name="mask-unasked",
        severity="error",
        title="A mask (typically causal) is applied on cases that ask for none.",
        fix="Apply a mask only when one is given: if mask is not None: scores = np.where(mask, scores, -np.inf).",
        what="On cases with no mask, with V = identity, the weights of the keys after each query's position (above the diagonal) are exactly 0 where the reference gives them weight; the reference with a causal mask (np.tril, or -inf above the diagonal) reproduces every probe.",
        why="Only a decoder that generates text left to right must not look ahead. Plain scaled dot-product attention, and encoders or cross-attention built on it, let every query see every key; a mask nobody asked for throws away most of the context of the first queries and makes the output depend on the order of the keys.",
        example="scores = np.where(np.tril(np.ones((T_q, T_k), dtype=bool)), scores, -np.inf)   # always",
        instead="def attention(Q, K, V, mask=None): ...; if mask is not None: scores = np.where(mask, scores, -np.inf)",
    ),
)

BY_NAME: dict[str, Rule] = {rule.name: rule for rule in RULES}
BY_CODE: dict[str, Rule] = {rule.code: rule for rule in RULES}


def lookup(key: str) -> Rule | None:
    """A rule by name or by code (case-insensitive)."""
    return BY_NAME.get(key.lower()) or BY_CODE.get(key.upper())
