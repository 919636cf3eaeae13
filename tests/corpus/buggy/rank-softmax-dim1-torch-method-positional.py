# The tensor method with the axis by position, scores.softmax(1): the keys of one sequence, the
# queries of a 3-D batch, the heads of a 4-D one.
import torch


def attention(Q, K, V):
    q, k, v = torch.as_tensor(Q), torch.as_tensor(K), torch.as_tensor(V)
    scores = torch.einsum("...qd,...kd->...qk", q, k) / k.size(-1) ** 0.5
    return torch.einsum("...qk,...kd->...qd", scores.softmax(1), v)
