"""Bug: the output is right, but the weights returned beside it are the log-softmax."""

import math

import torch
import torch.nn.functional as F


def attention(q, k, v):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    return F.softmax(scores, dim=-1) @ v, F.log_softmax(scores, dim=-1)
