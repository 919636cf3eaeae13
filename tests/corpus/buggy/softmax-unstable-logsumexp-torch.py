import math

import torch


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    log_z = scores.exp().sum(dim=-1, keepdim=True).log()
    return (scores - log_z).exp() @ v
