import math

import torch
import torch.nn.functional as F


def attention(Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor) -> torch.Tensor:
    scores = torch.matmul(Q, K.transpose(-2, -1)) / math.sqrt(Q.size(-1))
    attn = F.softmax(scores, dim=-1)
    return torch.matmul(attn, V).squeeze(1)
