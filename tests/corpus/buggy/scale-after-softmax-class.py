# Bug: a module-like class whose forward pass divides the attention map by sqrt(d_k) once it is normalised.
import numpy as np


class DotProductAttention:
    def __init__(self, eps=0.0):
        self.eps = eps

    def _softmax(self, z):
        z = z - z.max(axis=-1, keepdims=True)
        ez = np.exp(z)
        return ez / (ez.sum(axis=-1, keepdims=True) + self.eps)

    def __call__(self, q, k, v):
        att = self._softmax(np.einsum("...id,...jd->...ij", q, k))
        att = att / np.sqrt(k.shape[-1])
        return np.einsum("...ij,...jd->...id", att, v)


attention = DotProductAttention()
