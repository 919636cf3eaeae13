"""Bug: a PyTorch submission that returns the right numbers as a nested list (.tolist())."""

import math

import torch


def attention(q, k, v):
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.size(-1)), dim=-1)
    return (weights @ v).tolist()
