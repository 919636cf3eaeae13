"""The seed's two bugs in PyTorch: scores divided by d_k, and k.T, which on a 3-D tensor reverses
every axis (torch only warns that this use of .T is deprecated)."""

import torch
import torch.nn.functional as F


def attention(q, k, v):
    scores = q @ k.T / q.shape[-1]
    return F.softmax(scores, dim=-1) @ v
