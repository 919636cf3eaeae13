# torch.nn.functional.softmax with no dim: torch picks the axis from the rank (dim 1 on 2-D and
# 4-D input, dim 0 on 3-D), with a deprecation warning.
import math
import warnings

import torch


def _weights(scores):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.nn.functional.softmax(scores)


def attention(Q, K, V):
    q, k, v = map(torch.as_tensor, (Q, K, V))
    scores = q @ k.transpose(-2, -1) / math.sqrt(k.shape[-1])
    return _weights(scores) @ v
