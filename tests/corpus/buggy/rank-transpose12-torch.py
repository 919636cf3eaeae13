# k.transpose(1, 2): right for a (B, T, d) batch only.
import math

import torch


def attention(Q, K, V):
    q, k, v = map(torch.as_tensor, (Q, K, V))
    if q.dim() == 2:
        q, k, v = q.unsqueeze(0), k.unsqueeze(0), v.unsqueeze(0)
        out = torch.bmm(torch.softmax(torch.bmm(q, k.transpose(1, 2)) / math.sqrt(q.size(-1)), dim=-1), v)
        return out[0].numpy()
    scores = torch.matmul(q, k.transpose(1, 2)) / math.sqrt(q.size(-1))
    return torch.matmul(torch.softmax(scores, dim=-1), v).numpy()
