"""PyTorch, as most public implementations write it: transpose(-2, -1) and torch.softmax."""

import math

import torch


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    d_k = q.size(-1)
    scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(d_k)
    return torch.matmul(torch.softmax(scores, dim=-1), v)
