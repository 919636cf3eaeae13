# Bug: every step in bfloat16 (8 bits of significand, steps of ~4e-3), widened back at the end.
import math

import torch


def attention(Q, K, V):
    q, k, v = Q.bfloat16(), K.bfloat16(), V.bfloat16()
    s = q @ k.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    return (torch.softmax(s, dim=-1) @ v).to(Q.dtype)
