# Bug: a layer class whose normaliser is a log-softmax; its output is never exponentiated.
import numpy as np


class Attention:
    @staticmethod
    def log_softmax(a):
        top = np.max(a, axis=-1, keepdims=True)
        return a - top - np.log(np.sum(np.exp(a - top), axis=-1, keepdims=True))

    def __call__(self, queries, keys, values):
        logits = np.einsum("...td,...sd->...ts", queries, keys) / np.sqrt(queries.shape[-1])
        return np.einsum("...ts,...sv->...tv", self.log_softmax(logits), values)


attention = Attention()
