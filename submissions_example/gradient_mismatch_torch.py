"""Bug (PyTorch): a hand-written backward that leaves out the softmax's Jacobian; the forward is right."""

import math

import torch


class Attention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v):
        weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.size(-1)), dim=-1)
        ctx.save_for_backward(q, k, v, weights)
        return weights @ v

    @staticmethod
    def backward(ctx, grad):
        q, k, v, weights = ctx.saved_tensors
        scale = 1.0 / math.sqrt(q.size(-1))
        d_scores = grad @ v.transpose(-2, -1)  # should be weights * (dP - rowsum(dP * weights))
        return scale * d_scores @ k, scale * d_scores.transpose(-2, -1) @ q, weights.transpose(-2, -1) @ grad


def attention(q, k, v):
    return Attention.apply(q, k, v)
