# k.transpose(0, 1) swaps the right axes of a single (T, d) matrix only.
import math

import torch


def attention(Q, K, V):
    q, k, v = map(torch.as_tensor, (Q, K, V))
    scores = torch.matmul(q, k.transpose(0, 1)) / math.sqrt(q.shape[-1])
    return torch.matmul(torch.softmax(scores, dim=-1), v).numpy()
