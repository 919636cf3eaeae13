# Bug: takes np.log of a correct softmax and uses that as the attention weights.
import numpy as np


def softmax(z):
    z = z - z.max(axis=-1, keepdims=True)
    return np.exp(z) / np.exp(z).sum(axis=-1, keepdims=True)


def attention(Q, K, V):
    scores = np.matmul(Q, np.swapaxes(K, -1, -2)) / np.sqrt(K.shape[-1])
    return np.matmul(np.log(softmax(scores)), V)
