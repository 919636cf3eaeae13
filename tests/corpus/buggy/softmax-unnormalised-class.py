# Bug: a class whose kernel step returns exp(scores - max) as the attention map, with no division.
import numpy as np


class ExpAttention:
    def kernel(self, scores):
        return np.exp(scores - scores.max(axis=-1, keepdims=True))

    def __call__(self, Q, K, V):
        scale = 1.0 / np.sqrt(Q.shape[-1])
        return np.matmul(self.kernel(np.matmul(Q, np.swapaxes(K, -1, -2)) * scale), V)


attention = ExpAttention()
