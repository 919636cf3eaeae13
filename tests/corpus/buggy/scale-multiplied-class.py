# Bug: a callable object whose scale multiplies by sqrt(d_k) instead of dividing.
import numpy as np


class Attention:
    def __call__(self, query, key, value):
        d_k = key.shape[-1]
        logits = query @ key.swapaxes(-1, -2) * d_k ** 0.5
        logits -= logits.max(axis=-1, keepdims=True)
        probs = np.exp(logits)
        probs /= probs.sum(axis=-1, keepdims=True)
        return probs @ value


attention = Attention()
