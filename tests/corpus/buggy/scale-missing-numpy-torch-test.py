# NumPy code whose test compares it with torch: graded in NumPy, so its fixes are NumPy too.
import numpy as np
import torch


def attention(Q, K, V):
    s = Q @ np.swapaxes(K, -1, -2)
    w = np.exp(s - s.max(-1, keepdims=True))
    return w / w.sum(-1, keepdims=True) @ V


def test_against_torch():
    q, k, v = (torch.randn(2, 3, 4) for _ in range(3))
    ref = torch.nn.functional.scaled_dot_product_attention(q, k, v)
    assert np.allclose(attention(q.numpy(), k.numpy(), v.numpy()), ref.numpy())
