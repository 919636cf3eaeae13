"""The seed's two bugs, in a package that imports its helper by absolute name."""

from model.functional import softmax


def attention(Q, K, V):
    scores = Q @ K.T / Q.shape[-1]
    return softmax(scores) @ V
