import numpy as np


def attention(Q, K, V):
    d_k = K.shape[-1]
    scores = np.swapaxes(K, -1, -2)
    scores = Q @ scores / np.sqrt(d_k)
    # numerically stable softmax: shift each row by its max before exponentiating
    row_max = np.max(scores, axis=-1, keepdims=True)
    exp_scores = np.exp(scores - row_max)
    weights = exp_scores / np.sum(exp_scores, axis=-1, keepdims=True)
    return weights @ V
