# Bug: .half() on the way in, .double() on the way out: the softmax and both products in float16.
import math

import torch


def attention(q, k, v):
    scores = q.half() @ k.half().transpose(-2, -1) / math.sqrt(q.size(-1))
    return (torch.softmax(scores, dim=-1) @ v.half()).double()
