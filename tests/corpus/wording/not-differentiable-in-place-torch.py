# Bug: the softmax is done in place on a tensor autograd saved: exp_ keeps its output for the
# backward, and the division in place changes it, so the backward raises. The forward is right.
import math

import torch


def attention(Q, K, V):
    q = Q.clone()
    q /= math.sqrt(Q.shape[-1])
    s = q @ K.transpose(-2, -1)
    s = s - s.amax(-1, keepdim=True)
    s.exp_()
    s /= s.sum(-1, keepdim=True)
    return s @ V
