# .float() on the way in, .double() on the way out: single precision passes, with the warning.
import math

import torch


def attention(q, k, v):
    scores = q.float() @ k.float().transpose(-2, -1) / math.sqrt(q.size(-1))
    return (torch.softmax(scores, dim=-1) @ v.float()).double()
