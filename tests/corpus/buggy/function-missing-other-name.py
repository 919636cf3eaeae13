# A correct attention under another name: function-missing, and the fix names
# `--function scaled_dot_product_attention`.
import numpy as np


def softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def scaled_dot_product_attention(query, key, value, mask=None):
    scores = query @ np.swapaxes(key, -1, -2) / np.sqrt(query.shape[-1])
    return softmax(scores) @ value
