# Correct, with plain Python lists for one sequence and recursion over the leading axes.
import math

import numpy as np


def _attend(Q, K, V):
    d_k = len(Q[0])
    out = []
    for q in Q:
        scores = [sum(a * b for a, b in zip(q, k)) / math.sqrt(d_k) for k in K]
        top = max(scores)
        exps = [math.exp(s - top) for s in scores]
        total = sum(exps)
        weights = [e / total for e in exps]
        out.append([sum(w * v[j] for w, v in zip(weights, V)) for j in range(len(V[0]))])
    return out


def attention(Q, K, V):
    Q, K, V = np.asarray(Q), np.asarray(K), np.asarray(V)
    if Q.ndim == 2:
        return np.array(_attend(Q.tolist(), K.tolist(), V.tolist()))
    return np.stack([attention(q, k, v) for q, k, v in zip(Q, K, V)])
