# Right: an in-place division of a fresh clone, before anything saved it, changes no gradient.
import math

import torch


def attention(Q, K, V):
    q = Q.clone()
    q /= math.sqrt(Q.shape[-1])
    return torch.softmax(q @ K.transpose(-2, -1), dim=-1) @ V
