"""Bug (PyTorch): the weights are detached, so no gradient reaches Q or K; the outputs are right."""

import math

import torch


def attention(q, k, v):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    weights = torch.softmax(scores, dim=-1).detach()  # kept for plotting, and cut from the graph
    return weights @ v
