"""Right for what a 2-D take-home asks: one sequence. K.T and axis=1 are correct for 2-D input
(and wrong for a batch, which this task does not ask for)."""

import numpy as np


def attention(Q, K, V):
    scores = Q.dot(K.T) / np.sqrt(K.shape[1])
    scores = scores - scores.max(axis=1, keepdims=True)
    weights = np.exp(scores)
    weights = weights / weights.sum(axis=1, keepdims=True)
    return weights.dot(V)
