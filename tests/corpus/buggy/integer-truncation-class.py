# Bug: a class that hands back its result as integers (astype(int)), cutting every output toward zero.
import numpy as np


class IntAttention:
    def weights(self, Q, K):
        z = np.einsum("...qd,...kd->...qk", Q, K) / np.sqrt(Q.shape[-1])
        z = np.exp(z - z.max(axis=-1, keepdims=True))
        return z / z.sum(axis=-1, keepdims=True)

    def __call__(self, Q, K, V):
        return np.einsum("...qk,...kv->...qv", self.weights(Q, K), V).astype(int)


attention = IntAttention()
