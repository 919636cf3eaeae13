"""PyTorch, mask inverted: masked_fill(mask, -inf) fills the positions to keep."""

import torch
import torch.nn.functional as F


def attention(q, k, v, mask=None):
    scores = torch.matmul(q, k.transpose(-2, -1)) / q.shape[-1] ** 0.5
    if mask is not None:
        scores = scores.masked_fill(mask, float("-inf"))
    return torch.matmul(F.softmax(scores, dim=-1), v)
