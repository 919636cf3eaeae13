"""Correct: a PyTorch (output, None), need_weights=False style."""

import math

import torch


def attention(q, k, v):
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.size(-1)), dim=-1)
    return weights @ v, None
