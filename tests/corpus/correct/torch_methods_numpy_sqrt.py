# Torch code that takes its square root from NumPy: its tensor methods (softmax, dim=) make it torch.
import numpy as np
import torch


def attention(q, k, v):
    scores = q @ k.transpose(-2, -1) / np.sqrt(q.shape[-1])
    return scores.softmax(dim=-1) @ v


def test_shape():
    q = torch.randn(2, 3, 4)
    assert attention(q, q, q).shape == q.shape
